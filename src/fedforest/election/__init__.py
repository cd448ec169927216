"""The feature election: which features the sites train on.

* :mod:`~fedforest.election.selectors` -- each site's local selector, on its
  own columns (:func:`~fedforest.election.selectors.select_features`); its
  inputs checked in :mod:`~fedforest.election.selector_inputs` and its
  arithmetic in :mod:`~fedforest.election.selector_methods`;
* :mod:`~fedforest.election.ballot` -- the sites' votes and their count by
  feature name (:class:`~fedforest.election.ballot.Ballot`,
  :func:`~fedforest.election.ballot.elect`), with either normalization;
* :mod:`~fedforest.election.tuning` -- the hill-climb of the freedom degree
  (:func:`~fedforest.election.tuning.hill_climb`) and a site's score of a
  proposed mask (:func:`~fedforest.election.tuning.score_mask`).

The package sits below :mod:`fedforest.federation`, whose site and server run
it; it imports only numpy, pandas, scipy, scikit-learn, scikit-survival (inside the
functions of a survival target) and fedforest's model and foundations.
"""

"""The data_prep scripts as a package installed with fedforest.

Each script runs as documented (``python data_prep/make_demo_data.py --out
demo_data``) and its functions are importable wherever fedforest is installed
(``from data_prep.make_demo_data import make_demo_data``), without a
``sys.path`` edit: the tests and the benchmarks use them so.

* :mod:`data_prep.make_demo_data`: the three demo hospitals (``make demo-data``);
* :mod:`data_prep.make_synthetic`: the paper's synthetic S-500 tables as CSV;
* :mod:`data_prep.jaccard_split`: one table split into sites at a pairwise Jaccard overlap,
  with the job's YAML files;
* :mod:`data_prep.arguments`: the scripts' argument types.
"""

"""The thin NVIDIA FLARE layer: controller, executor and job builder.

Only this subpackage imports nvflare; it moves payloads between sites and
calls the core (:mod:`fedforest.federation.site`, :mod:`fedforest.federation.server`).
"""

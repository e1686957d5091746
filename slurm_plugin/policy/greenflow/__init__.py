"""GreenFlow (TPDS 2025): minimise average JCT under a carbon budget. So far only the pure
predictor (``predict.py``): JCT, energy and carbon of a job under a (start, GPUs, power cap)
choice, from the configuration models and a carbon forecast."""

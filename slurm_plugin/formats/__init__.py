"""Readers of the outside formats both the live path and the simulator read: carbon-intensity
CSV files and forecasts (``carbon_csv``, ``carbon_forecast``, the provider interface in
``carbon_series``), ``sacct`` rows (``sacct_rows``) and wattbatch's record in a job's comments
(``admin_comment``). They live apart from the adapters (``slurm/``, ``telemetry/``) so that the
simulator imports no live adapter and an adapter's change never changes a simulated figure."""

"""Experiment tracking: a run's scenario, rounds, summary and plots written to TensorBoard,
MLflow, Weights & Biases (offline) or CSV files as the run goes (docs/tracking.md).

base.py: the Tracker interface; registry.py: the tracker names (a plug-in kind);
values.py: what is logged; session.py: a run's and a sweep's trackers, resume;
csv_files.py, tensorboard_events.py, mlflow_store.py, wandb_offline.py: the backends.
"""

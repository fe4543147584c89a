"""Training machinery shared by every component: the optimizer (a torch step
for torch parameters, following the config's `[training.optimizer]`)."""

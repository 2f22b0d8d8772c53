"""Online learning on the replay buffer: the learner, its worker thread, holdout gate, model
versions, forgetting, the learning state on disk and the budgeted evaluation."""

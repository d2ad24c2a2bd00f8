# RL environments, MCTS and the EfficientZero networks (core/rl, core/models/efficientzero).
glimpse_add_test(test_rl_envs SOURCES test_rl_envs.cpp LIBS glimpse_core TIMEOUT 120 LABELS rl)
glimpse_add_test(test_mcts SOURCES test_mcts.cpp LIBS glimpse_core TIMEOUT 120 LABELS rl)
glimpse_add_test(test_efficientzero SOURCES test_efficientzero.cpp LIBS glimpse_core TIMEOUT 120 LABELS rl)

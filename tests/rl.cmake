# RL environments, MCTS and the EfficientZero networks (core/rl, core/models/efficientzero).
glimpse_add_test(test_rl_envs SOURCES test_rl_envs.cpp LIBS glimpse_core TIMEOUT 120 LABELS rl)
glimpse_add_test(test_mcts SOURCES test_mcts.cpp LIBS glimpse_core TIMEOUT 120 LABELS rl)
glimpse_add_test(test_efficientzero SOURCES test_efficientzero.cpp LIBS glimpse_core TIMEOUT 120 LABELS rl)
# The official EfficientZero network: converter, parity on a Python-written state dict, old checkpoints.
glimpse_add_test(test_ez_convert SOURCES test_ez_convert.cpp LIBS glimpse_core TIMEOUT 300 LABELS rl)
glimpse_add_test(test_ez_replay SOURCES test_ez_replay.cpp LIBS glimpse_core TIMEOUT 60 LABELS rl)
glimpse_add_test(test_ez_loss SOURCES test_ez_loss.cpp LIBS glimpse_core TIMEOUT 120 LABELS rl)
glimpse_add_test(test_ez_reanalyze SOURCES test_ez_reanalyze.cpp LIBS glimpse_core TIMEOUT 120 LABELS rl)
glimpse_add_test(test_ez_train SOURCES test_ez_train.cpp LIBS glimpse_core TIMEOUT 300 LABELS rl)
glimpse_add_test(test_episode SOURCES test_episode.cpp LIBS glimpse_core TIMEOUT 60 LABELS rl)
# Replay viewer core (core/replay): reader, frame cache, bench; importers on Python-written fixtures.
glimpse_add_test(test_replay_reader SOURCES test_replay_reader.cpp LIBS glimpse_core TIMEOUT 120 LABELS rl replay)
glimpse_add_test(test_replay_import SOURCES test_replay_import.cpp LIBS glimpse_core TIMEOUT 120 LABELS rl replay)
glimpse_add_test(test_replay_model SOURCES test_replay_model.cpp LIBS glimpse_core TIMEOUT 120 LABELS rl replay)
glimpse_add_test(test_world_model SOURCES test_world_model.cpp LIBS glimpse_core TIMEOUT 120 LABELS rl replay)
glimpse_add_test(test_replay_cli SOURCES test_replay_cli.cpp LIBS glimpse_app TIMEOUT 120 LABELS rl replay)
# XTRA (core/models/xtra, core/rl/shared_space.h): task weights, shared space, datasets, teachers, distillation.
glimpse_add_test(test_xtra SOURCES test_xtra.cpp LIBS glimpse_core TIMEOUT 300 LABELS rl xtra)

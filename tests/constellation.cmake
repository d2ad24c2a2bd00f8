# ConstellationNet (core/models/constellation): model, training and few-shot evaluation suites.
glimpse_add_test(test_constellation_model SOURCES test_constellation_model.cpp LIBS glimpse_core TIMEOUT 300 LABELS constellation)
glimpse_add_test(test_constellation_train SOURCES test_constellation_train.cpp LIBS glimpse_app TIMEOUT 300 LABELS constellation train)

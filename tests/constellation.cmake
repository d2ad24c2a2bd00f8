# ConstellationNet (core/models/constellation): model, training and few-shot evaluation suites.
glimpse_add_test(test_constellation_model SOURCES test_constellation_model.cpp LIBS glimpse_core TIMEOUT 300 LABELS constellation)
glimpse_add_test(test_constellation_train SOURCES test_constellation_train.cpp LIBS glimpse_app TIMEOUT 300 LABELS constellation train)
# Official checkpoints: installer/convert_constellation.py against installer/constellation_reference.py
# (skipped without Debian's python3 torch), ResNet-12's official names, old names still loading.
glimpse_add_test(test_constellation_convert SOURCES test_constellation_convert.cpp LIBS glimpse_core TIMEOUT 300 LABELS constellation)
# `glimpse infer --model constellation` and `glimpse bench constellation` as separate processes.
glimpse_add_test(test_constellation_cli SOURCES test_constellation_cli.cpp LIBS glimpse_core TIMEOUT 300 LABELS constellation)
add_dependencies(test_constellation_cli glimpse)
target_compile_definitions(test_constellation_cli PRIVATE GLIMPSE_EXE="$<TARGET_FILE:glimpse>")

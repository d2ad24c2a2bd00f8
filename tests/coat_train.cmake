# CoaT training (core/data/classification, core/models/coat/train, glimpse train coat):
# idx / class-folder readers with bad input, tiny training runs (learning, resume equals an
# uninterrupted run, run log), the PE ablation CLI on generated data.
glimpse_add_test(test_class_data SOURCES test_class_data.cpp LIBS glimpse_core TIMEOUT 120 LABELS coat data)
glimpse_add_test(test_coat_train SOURCES test_coat_train.cpp LIBS glimpse_core TIMEOUT 300 LABELS coat train)
glimpse_add_test(test_coat_train_cli SOURCES test_coat_train_cli.cpp LIBS glimpse_app TIMEOUT 600 LABELS coat train)
add_dependencies(test_coat_train_cli glimpse)
target_compile_definitions(test_coat_train_cli PRIVATE GLIMPSE_EXE="$<TARGET_FILE:glimpse>")

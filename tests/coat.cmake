# CoaT (core/models/coat): model, trace and checkpoint/converter suites. Small configs (the
# Table 3.1 variants are only instantiated); the converter checks run Debian's /usr/bin/python3
# and skip when it has no torch.
glimpse_add_test(test_coat_model SOURCES test_coat_model.cpp LIBS glimpse_core TIMEOUT 300 LABELS coat)
glimpse_add_test(test_coat_trace SOURCES test_coat_trace.cpp LIBS glimpse_core TIMEOUT 300 LABELS coat)
glimpse_add_test(test_coat_checkpoint SOURCES test_coat_checkpoint.cpp LIBS glimpse_core TIMEOUT 300 LABELS coat)
glimpse_add_test(test_coat_cli SOURCES test_coat_cli.cpp LIBS glimpse_app TIMEOUT 300 LABELS coat)
add_dependencies(test_coat_cli glimpse)
target_compile_definitions(test_coat_cli PRIVATE GLIMPSE_EXE="$<TARGET_FILE:glimpse>")

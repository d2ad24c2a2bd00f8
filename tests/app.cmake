glimpse_add_test(test_gui SOURCES test_gui.cpp LIBS glimpse_app XVFB TIMEOUT 300)
glimpse_add_test(test_cli SOURCES test_cli.cpp LIBS glimpse_app TIMEOUT 300)
add_dependencies(test_cli glimpse)
target_compile_definitions(test_cli PRIVATE GLIMPSE_EXE="$<TARGET_FILE:glimpse>")

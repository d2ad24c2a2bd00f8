glimpse_add_test(test_gui SOURCES test_gui.cpp LIBS glimpse_app XVFB TIMEOUT 300)
glimpse_add_test(test_cli SOURCES test_cli.cpp LIBS glimpse_app TIMEOUT 300)
add_dependencies(test_cli glimpse glimpse-headless)
target_compile_definitions(test_cli PRIVATE GLIMPSE_EXE="$<TARGET_FILE:glimpse>"
                           GLIMPSE_HEADLESS_EXE="$<TARGET_FILE:glimpse-headless>")
# Live training charts (widgets/live_chart), offscreen.
# (glimpse_core only for the shared test PCH, which includes LibTorch.)
glimpse_add_test(test_live_chart SOURCES test_live_chart.cpp LIBS glimpse_widgets glimpse_core TIMEOUT 120)
# Training panel and view (app/training): run-log following, overlay, job control, preview, the
# charts tab of the main window; under Xvfb (the main window's Vulkan viewport).
glimpse_add_test(test_training_panel SOURCES test_training_panel.cpp LIBS glimpse_app XVFB TIMEOUT 600)
add_dependencies(test_training_panel glimpse)   # follows a `glimpse train letr` process
target_compile_definitions(test_training_panel PRIVATE GLIMPSE_EXE="$<TARGET_FILE:glimpse>")
glimpse_add_test(test_letr_inspector SOURCES test_letr_inspector.cpp LIBS glimpse_app XVFB TIMEOUT 300 LABELS letr)
# CoaT inspector (app/coat_inspector, app/coat_view) on a small random CoaT-Lite, under Xvfb.
glimpse_add_test(test_coat_inspector SOURCES test_coat_inspector.cpp LIBS glimpse_app XVFB TIMEOUT 300 LABELS coat)
# The inspector test also starts the glimpse executable (--run-letr --screenshot exits on its own).
add_dependencies(test_letr_inspector glimpse)
target_compile_definitions(test_letr_inspector PRIVATE GLIMPSE_EXE="$<TARGET_FILE:glimpse>")
# The model-family registry: panels, activation, opening files by kind, command table; under Xvfb.
glimpse_add_test(test_families SOURCES test_families.cpp LIBS glimpse_app XVFB TIMEOUT 300)
# No function in app/ or core/ longer than 120 lines (tools/long_functions.py).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME function_length
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/long_functions.py --max 120
                   ${PROJECT_SOURCE_DIR}/app ${PROJECT_SOURCE_DIR}/core)
  set_tests_properties(function_length PROPERTIES TIMEOUT 60 LABELS style)
endif()
# The replay viewer (app/replay) through the main window: open, step, scrub, play, export, model; Xvfb.
glimpse_add_test(test_replay_panel SOURCES test_replay_panel.cpp LIBS glimpse_app XVFB TIMEOUT 300 LABELS replay)
glimpse_add_test(test_demo SOURCES test_demo.cpp LIBS glimpse_app XVFB TIMEOUT 300 LABELS replay demo)
# A first launch as a new user tries it (issue 56): FILE kinds and --screenshot, refused options,
# run log names, models loaded on first use; runs the glimpse executable under Xvfb.
glimpse_add_test(test_first_use SOURCES test_first_use.cpp LIBS glimpse_app XVFB TIMEOUT 600)
add_dependencies(test_first_use glimpse)
target_compile_definitions(test_first_use PRIVATE GLIMPSE_EXE="$<TARGET_FILE:glimpse>")
# The results browser (app/results, issue 53): the Results dock driven on small results files
# written with core/results (open by kind, sort, chart filters, overlay pixels, compare, export); Xvfb.
glimpse_add_test(test_results_browser SOURCES test_results_browser.cpp LIBS glimpse_app XVFB TIMEOUT 300 LABELS results)

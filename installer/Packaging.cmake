# CPack: `cpack -G DEB` in the build folder produces glimpse_<version>_amd64.deb with the
# binary, a .desktop entry and an icon.
install(PROGRAMS ${PROJECT_SOURCE_DIR}/installer/convert_letr.py DESTINATION share/glimpse/tools)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/installer/convert_coat.py DESTINATION share/glimpse/tools)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/installer/convert_efficientzero.py DESTINATION share/glimpse/tools)
install(FILES ${PROJECT_SOURCE_DIR}/resources/imagenet_classes.txt DESTINATION share/glimpse)
# The demo LETR model, once trained and placed in resources/ (OPTIONAL: skipped when absent at
# install time); found at <prefix>/share/glimpse/letr_demo.h5 by defaultLetrCheckpoint().
install(FILES ${PROJECT_SOURCE_DIR}/resources/letr_demo.h5 DESTINATION share/glimpse OPTIONAL)
install(FILES ${PROJECT_SOURCE_DIR}/resources/constellation_demo.h5 DESTINATION share/glimpse)
# M-LSD tiny (Apache-2.0; provenance in resources/NOTICE): the line baseline beside LSD.
install(FILES ${PROJECT_SOURCE_DIR}/resources/mlsd_tiny.h5 ${PROJECT_SOURCE_DIR}/resources/NOTICE DESTINATION share/glimpse)
install(FILES ${PROJECT_SOURCE_DIR}/installer/glimpse.desktop DESTINATION share/applications)
install(FILES ${PROJECT_SOURCE_DIR}/resources/glimpse.svg
        DESTINATION share/icons/hicolor/scalable/apps)

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "glimpse")
set(CPACK_PACKAGE_VENDOR "Glimpse developers")
set(CPACK_PACKAGE_CONTACT "Glimpse developers <glimpse@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Desktop lab for attention models and world models")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "science")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "mesa-vulkan-drivers | vulkan-icd, libopenblas0-pthread")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
include(CPack)

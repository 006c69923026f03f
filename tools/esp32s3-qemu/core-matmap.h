/* Minimal core-matmap.h for the esp32s3 core imported into QEMU (tools/esp32s3-qemu/build.sh).
 * The ESP32-S3 (LX7) uses region protection without an MPU or an MMU, so QEMU's overlay_tool.h
 * needs no cache-attribute or MPU map from this file; the overlay repository does not ship one. */
#ifndef XTENSA_CONFIG_CORE_MATMAP_H
#define XTENSA_CONFIG_CORE_MATMAP_H
#endif

// The memory of the board a runner build stands for (override with -DBOARD_SRAM_BYTES=... etc.).
// Default: an ESP32-S3 with 8 MB PSRAM and 16 MB flash, of which the runner gives the model
// 320 KiB of SRAM. The emulated Cortex-M7 (mps2-an500: 16 MB PSRAM for heap) uses a smaller board.
#pragma once

#ifndef BOARD_SRAM_BYTES
#define BOARD_SRAM_BYTES (320u * 1024u)
#endif
#ifndef BOARD_PSRAM_BYTES
#define BOARD_PSRAM_BYTES (8u * 1024u * 1024u)
#endif
#ifndef BOARD_FLASH_BYTES
#define BOARD_FLASH_BYTES (16u * 1024u * 1024u)
#endif

/* ESP-IDF's Xtensa GCC makes uint32_t / int32_t `unsigned long` / `long` (clang's Xtensa target and
 * the PC's compilers: int). Force-included (-include) by tools/check_firmware_syntax.sh and
 * tools/check_firmware_component.sh so that clang refuses a printf format ESP-IDF's -Werror would. */
#pragma clang diagnostic ignored "-Wbuiltin-macro-redefined"
#undef __UINT32_TYPE__
#define __UINT32_TYPE__ long unsigned int
#undef __INT32_TYPE__
#define __INT32_TYPE__ long int

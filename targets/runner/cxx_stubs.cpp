// The C++ runtime hooks the core's classes reference on a board without libstdc++ / libsupc++:
// a pure virtual call and the deleting destructors' operator delete never run (nothing is
// deleted or called through an incomplete object), so each stops the run if it ever does.
#include <stdlib.h>

extern "C" void __cxa_pure_virtual() { abort(); }
void operator delete(void*) noexcept { abort(); }
void operator delete(void*, __SIZE_TYPE__) noexcept { abort(); }

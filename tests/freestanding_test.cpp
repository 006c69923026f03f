// The core library (src/core, quant, kernels, model, format readers) must not need a heap, C++
// exceptions, RTTI or process exits: DESIGN.md's freestanding contract. Checked on the built archive.
#include <cstdio>
#include <set>
#include <sstream>

#include "test_support.h"

namespace mcullm {
namespace {

TEST(Freestanding, CoreArchiveReferencesNoHeapExceptionsOrExit) {
  const std::string lib = std::string(MCULLM_BINARY_DIR) + "/libmcullm_core.a";
  const std::string cmd = "nm -u -C " + lib + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  const std::set<std::string> forbidden = {"malloc", "calloc", "realloc", "free", "operator new", "operator delete",
                                           "__cxa_throw", "__cxa_allocate_exception", "__gxx_personality_v0",
                                           "abort", "exit", "_exit", "__cxa_guard_acquire", "typeinfo"};
  std::istringstream lines(out);
  std::string line;
  int undefined = 0;
  while (std::getline(lines, line)) {
    if (line.find(" U ") == std::string::npos) continue;
    ++undefined;
    const std::string sym = line.substr(line.find(" U ") + 3);
    for (const std::string& bad : forbidden) {
      const bool hit = sym == bad || sym.rfind(bad + "(", 0) == 0 || sym.rfind(bad + " ", 0) == 0;
      EXPECT_FALSE(hit) << "the core references " << sym;
    }
  }
  EXPECT_GT(undefined, 0) << "nm printed no undefined symbols; the check would be vacuous:\n" << out;
}

}  // namespace
}  // namespace mcullm

// The mcullm firmware: one role per build (menuconfig > mcullm > Role of this board).
//   single  the board image from the model partition, the line protocol on the serial port
//   master  the same, with the layers on a node board over the SPI link
//   node    runs the layers the master assigns, over the SPI link
// All the logic is src/board (written against board/hal.h, tested on the PC through the host HAL);
// this file only wires the ESP-IDF HAL (hal_esp32s3.h) to it.
#include <stdio.h>
#include <string.h>

#include "board/dual_core_pool.h"
#include "board/line_codec.h"
#include "board/line_server.h"
#include "board/mapped_model.h"
#include "board/node.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "hal_esp32s3.h"
#include "kernels/kernels.h"
#include "sdkconfig.h"

using namespace mcullm;
using namespace mcullm::board;

namespace {

#if CONFIG_MCULLM_ROLE_MASTER
constexpr Role kRole = Role::kMaster;
#elif CONFIG_MCULLM_ROLE_NODE
constexpr Role kRole = Role::kNode;
#else
constexpr Role kRole = Role::kSingle;
#endif

// Static: the objects are large (the line splitter's 16 KB buffer, the decoder's tables) and live
// for good; their big buffers come from the tiers' arenas.
Esp32s3Hal g_hal;
LineServer g_server;
MappedModel g_model;
FrameLink g_link;
Node g_node;

// A board that could not start still answers every line, with the reason, so that the PC (and the
// page) show it instead of waiting.
[[noreturn]] void refuse_forever(const Status& why) {
  g_hal.log(why.message());
  char msg[Status::kMaxMessage + 32];
  const int k = snprintf(msg, sizeof msg, "the board could not start: %s", why.message());
  char line[lineproto::kMaxFormattedLine];
  const size_t len = lineproto::format_error(msg, k > 0 ? static_cast<size_t>(k) : 0, line);
  uint8_t buf[64];
  bool content = false;  // the current line has more than spaces (blank lines get no answer)
  for (;;) {
    const long n = g_hal.serial().read(buf, sizeof buf, 1000);
    for (long i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        content = content || (buf[i] != ' ' && buf[i] != '\r');
        continue;
      }
      if (content) g_hal.serial().write(reinterpret_cast<const uint8_t*>(line), len);
      content = false;
    }
  }
}

Tier work_tier() {
#if CONFIG_MCULLM_WORK_IN_PSRAM
  return Tier::kPsram;
#else
  return Tier::kSram;
#endif
}

// The master resets the chain (reset low 50 ms) and waits up to 30 s for its ready line.
Status reset_nodes() {
  g_hal.gpio_write(Gpio::kReset, false);
  vTaskDelay(pdMS_TO_TICKS(50));
  g_hal.gpio_write(Gpio::kReset, true);
  for (int waited = 0; waited < 30000; waited += 10) {
    if (g_hal.gpio_read(Gpio::kReady)) return Status::Ok();
    vTaskDelay(pdMS_TO_TICKS(10));
  }
  return Status::Error(Code::kIo, "the nodes did not raise the ready line within 30 s");
}

[[noreturn]] void run_node(ThreadPool* pool, const KernelSet* kernels) {
  const Status st = start_node(g_hal, "model", work_tier(), CONFIG_MCULLM_CTX, CONFIG_MCULLM_NODE_STREAMS, pool, kernels, &g_model,
                               &g_link, &g_node);
  if (!st.ok()) {
    g_hal.log(st.message());
    for (;;) vTaskDelay(pdMS_TO_TICKS(1000));  // ready stays low: the master says why it waits
  }
  g_hal.gpio_write(Gpio::kReady, true);
  g_hal.log("node ready");
  for (;;) {
    if (Status s = g_node.poll(100); !s.ok()) g_hal.log(s.message());
  }
}

}  // namespace

extern "C" void app_main(void) {
  if (Status st = g_hal.init(kRole); !st.ok()) {
    g_hal.log(st.message());
    if (kRole == Role::kNode) return;
    refuse_forever(st);
  }
#if CONFIG_MCULLM_SECOND_CORE
  static DualCorePool pool(g_hal.worker());
#else
  static SerialPool pool;
#endif
  const KernelSet* kernels = kernels_by_name(CONFIG_MCULLM_KERNELS);
  if (kernels == nullptr)
    refuse_forever(Status::Error(Code::kInvalidArgument, "no kernel table \"" CONFIG_MCULLM_KERNELS "\" in this build"));
  if (kRole == Role::kNode) run_node(&pool, kernels);

  LineServerOptions o;
  o.kernels = kernels;
  o.pool = &pool;
  o.ctx_len = CONFIG_MCULLM_CTX;
  o.work_tier = work_tier();
  o.prefill_batch = CONFIG_MCULLM_PREFILL_BATCH;
  o.sparse_ffn_max_live = CONFIG_MCULLM_SPARSE_FFN_MAX_LIVE;
#if CONFIG_MCULLM_SPARSE_FFN_DOWN_COLUMNS
  o.sparse_ffn_down_columns = true;
#endif
  if (kRole == Role::kMaster) {
    o.cluster_master = true;
#if CONFIG_MCULLM_ROLE_MASTER
    o.master.nodes = CONFIG_MCULLM_CLUSTER_NODES;
#endif
    if (Status st = reset_nodes(); !st.ok()) refuse_forever(st);
  }
  if (Status st = g_server.init(g_hal, o); !st.ok()) refuse_forever(st);
  char ready[96];
  snprintf(ready, sizeof ready, "ready: speaking the line protocol (kernels %s, %d core%s)", kernels->name, pool.size(),
           pool.size() == 1 ? "" : "s");
  g_hal.log(ready);
  g_server.serve(-1);
}

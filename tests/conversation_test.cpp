// The multi-turn conversation (model/conversation_host.h) on stories260K: every position is evaluated
// exactly once across turns (earlier turns are never fed again), a later turn's reply equals what a
// fresh decoder gives for the same tokens (the KV cache is reused correctly), the cache holds the
// template's text, a full context is a clear error, and reset starts over. Also `mcullm run -cnv`
// driven through a pipe.
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "test_support.h"
#include "core/thread_pool_host.h"
#include "model/conversation_host.h"
#include "load/model_loader_host.h"
#include "kernels/kernels.h"

namespace mcullm {
namespace {

using test::run_cli;
using test::shared_path;

// Records the position of every forward call.
class CountingDecoder : public Decoder {
 public:
  explicit CountingDecoder(Decoder& inner) : inner_(inner) {}
  Status forward(int token, int pos, const float** logits) override {
    positions.push_back(pos);
    tokens.push_back(token);
    return inner_.forward(token, pos, logits);
  }
  int vocab_size() const override { return inner_.vocab_size(); }
  int ctx_len() const override { return inner_.ctx_len(); }
  std::vector<int> positions, tokens;

 private:
  Decoder& inner_;
};

struct ChatRig {
  std::unique_ptr<LoadedModel> lm;
  std::unique_ptr<Tokenizer> tok;
  HostThreadPool pool{1};
  DecoderInstance dec;
  Sampler sampler;
  bool ok = false;
  explicit ChatRig(int ctx) {
    std::string source;
    Status st = load_model(shared_path("models/stories260K/stories260K.bin"), &lm);
    if (st.ok()) st = load_tokenizer(*lm, "", &tok, &source);
    if (st.ok()) st = make_decoder(*lm, ctx, &pool, kernels_by_name("auto"), 16ull * lm->model.cfg.vocab_size, &dec);
    SamplerConfig sc;
    sc.temperature = 0;  // greedy: replies can be compared with a fresh decoder's
    if (st.ok()) st = sampler.init(sc, lm->model.cfg.vocab_size, dec.work);
    EXPECT_TRUE(st.ok()) << st.message();
    ok = st.ok();
  }
};

// Greedy continuation of `prefix` on a fresh decoder, n tokens.
std::vector<int> fresh_greedy(const std::vector<int>& prefix, int n) {
  ChatRig s(512);
  const float* logits = nullptr;
  int pos = 0;
  for (int id : prefix) EXPECT_TRUE(s.dec.decoder->forward(id, pos++, &logits).ok());
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    int best = 0;
    for (int v = 1; v < s.dec.decoder->vocab_size(); ++v)
      if (logits[v] > logits[best]) best = v;
    out.push_back(best);
    if (i + 1 < n) {
      EXPECT_TRUE(s.dec.decoder->forward(best, pos++, &logits).ok());
    }
  }
  return out;
}

TEST(Conversation, EachPositionIsEvaluatedOnceAndTheCacheIsReused) {
  MC_REQUIRE_SHARED();
  ChatRig s(512);
  ASSERT_TRUE(s.ok);
  CountingDecoder counting(*s.dec.decoder);
  const ChatFormat format(ChatTemplate(ChatTemplateKind::kChatML), *s.tok);
  Conversation conv(counting, s.sampler, *s.tok, format);
  conv.set_system("You tell stories.");
  ChatReply r1, r2;
  ASSERT_TRUE(conv.reply("Once upon a time", 12, nullptr, nullptr, &r1).ok());
  const int after1 = conv.n_past();
  ASSERT_TRUE(conv.reply("Tell me more", 12, nullptr, nullptr, &r2).ok());
  EXPECT_EQ(conv.turns(), 2);
  // Positions 0, 1, 2, ... each exactly once: turn 2 did not feed turn 1 again.
  ASSERT_EQ(static_cast<int>(counting.positions.size()), conv.n_past());
  for (size_t i = 0; i < counting.positions.size(); ++i) ASSERT_EQ(counting.positions[i], static_cast<int>(i));
  EXPECT_EQ(counting.tokens, conv.cache_tokens());
  EXPECT_EQ(after1 + r2.n_prompt + r2.n_generated - 1, conv.n_past());  // the last sampled token is not fed

  // The cache: BOS + the template's first turn, the reply, then the second turn's text.
  std::string first;
  ASSERT_TRUE(format.chat_template().continue_conversation({{"system", "You tell stories."}, {"user", "Once upon a time"}}, true, false, &first).ok());
  std::vector<int> expected_head;
  ASSERT_TRUE(format.encode(first, &expected_head).ok());
  expected_head.insert(expected_head.begin(), s.tok->bos_id());
  ASSERT_GE(conv.cache_tokens().size(), expected_head.size());
  EXPECT_EQ(std::vector<int>(conv.cache_tokens().begin(), conv.cache_tokens().begin() + expected_head.size()), expected_head);
  // Turn 1's reply: every sampled token but the last is in the cache; the last opens turn 2.
  ASSERT_FALSE(r1.ended_by_eot);
  EXPECT_EQ(s.tok->decode(std::vector<int>(conv.cache_tokens().begin() + expected_head.size(), conv.cache_tokens().begin() + after1 + 1)),
            r1.text);
  EXPECT_EQ(after1, static_cast<int>(expected_head.size()) + r1.n_generated - 1);

  // Turn 2's reply equals a fresh decoder's greedy continuation of the same tokens.
  const std::vector<int> prefix(conv.cache_tokens().begin(), conv.cache_tokens().begin() + after1 + r2.n_prompt);
  const std::vector<int> fresh = fresh_greedy(prefix, r2.n_generated);
  std::vector<int> replied(conv.cache_tokens().begin() + after1 + r2.n_prompt, conv.cache_tokens().end());
  ASSERT_EQ(replied.size() + 1, fresh.size());  // the last sampled token is not fed yet
  EXPECT_EQ(replied, std::vector<int>(fresh.begin(), fresh.end() - 1));
  EXPECT_EQ(s.tok->decode(fresh), r2.text);
}

TEST(Conversation, FullContextIsAClearErrorAndResetStartsOver) {
  MC_REQUIRE_SHARED();
  ChatRig s(40);
  ASSERT_TRUE(s.ok);
  const ChatFormat format(ChatTemplate(ChatTemplateKind::kLlama2), *s.tok);
  Conversation conv(*s.dec.decoder, s.sampler, *s.tok, format);
  ChatReply r;
  // The first turn fits; the reply runs into the end of the context.
  ASSERT_TRUE(conv.reply("Hi", 100, nullptr, nullptr, &r).ok());
  EXPECT_TRUE(r.context_full);
  EXPECT_EQ(conv.n_past(), 40);
  const Status full = conv.reply("More", 10, nullptr, nullptr, &r);
  EXPECT_EQ(full.code(), Code::kOutOfRange);
  EXPECT_NE(std::string(full.message()).find("/reset"), std::string::npos) << full.message();
  conv.reset();
  EXPECT_EQ(conv.n_past(), 0);
  ASSERT_TRUE(conv.reply("Hi", 3, nullptr, nullptr, &r).ok());
  // A turn longer than the context: refused, and the conversation is left as it was.
  const int before = conv.n_past();
  const Status too_long = conv.reply(std::string(400, 'a'), 3, nullptr, nullptr, &r);
  EXPECT_EQ(too_long.code(), Code::kOutOfRange) << too_long.message();
  EXPECT_EQ(conv.n_past(), before);
  EXPECT_EQ(conv.reply("Hi", 0, nullptr, nullptr, &r).code(), Code::kInvalidArgument);
}

TEST(Conversation, StopsAtEndOfTurnAndFeedsItNextTurn) {
  MC_REQUIRE_SHARED();
  ChatRig s(512);
  ASSERT_TRUE(s.ok);
  const ChatFormat format(ChatTemplate(ChatTemplateKind::kLlama2), *s.tok);
  Conversation conv(*s.dec.decoder, s.sampler, *s.tok, format);
  // stories260K ends a story with BOS (an end of turn for its vocabulary): greedy gets there.
  ChatReply r;
  ASSERT_TRUE(conv.reply("Once upon a time there was a cat.", 400, nullptr, nullptr, &r).ok());
  ASSERT_TRUE(r.ended_by_eot) << r.text;
  const int n = conv.n_past();
  ASSERT_TRUE(conv.reply("Again", 5, nullptr, nullptr, &r).ok());
  // The end-of-turn token comes first in the next turn, at the position right after the reply.
  EXPECT_TRUE(format.is_end_of_turn(conv.cache_tokens()[n]));
}

TEST(CliChat, ConversationThroughAPipe) {
  MC_REQUIRE_SHARED();
  const std::string model = shared_path("models/stories260K/stories260K.bin");
  const auto r = run_cli({"run", "-m", model, "-cnv", "--chat-template", "llama2", "-sys", "Be nice", "--temp", "0", "-n", "20"},
                         "Hello there\nTell me a story\n/reset\nHello there\n/exit\nnot read\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("turn 1: fed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("turn 2: fed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("conversation reset"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("turn 3"), std::string::npos) << r.err;  // /exit stops before "not read"
  // Three replies; the one after /reset repeats the first (same conversation, greedy).
  std::vector<std::string> lines;
  size_t at = 0;
  for (size_t nl; (nl = r.out.find('\n', at)) != std::string::npos; at = nl + 1) lines.push_back(r.out.substr(at, nl - at));
  ASSERT_GE(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines.front(), lines.back());
  // Turn 2 starts where turn 1 ended.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("turn 1: fed \\d+ tokens at positions 0\\.\\.\\d+, .*, (\\d+) of 512 context used\nmcullm: turn 2: fed \\d+ tokens at positions (\\d+)\\.\\.")))
      << r.err;
  EXPECT_EQ(m[1].str(), m[2].str());

  // Without a chat template in the model and no --chat-template: a clear error.
  const auto none = run_cli({"run", "-m", model, "-cnv"}, "Hi\n");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("--chat-template"), std::string::npos) << none.err;
  const auto bad = run_cli({"run", "-m", model, "-cnv", "--chat-template", "vicuna"}, "Hi\n");
  EXPECT_NE(bad.exit_code, 0);
  const auto with_p = run_cli({"run", "-m", model, "-cnv", "--chat-template", "chatml", "-p", "x"}, "Hi\n");
  EXPECT_EQ(with_p.exit_code, 2) << with_p.err;
  const auto sys_alone = run_cli({"run", "-m", model, "-sys", "x", "-p", "x"});
  EXPECT_EQ(sys_alone.exit_code, 2) << sys_alone.err;
  // A full context: the error is reported and the session goes on.
  const auto full = run_cli({"run", "-m", model, "-cnv", "--chat-template", "chatml", "-c", "48", "--temp", "0", "-n", "100"},
                            "Hi\nHi again\n/reset\nHi\n");
  EXPECT_EQ(full.exit_code, 0) << full.err;
  EXPECT_NE(full.err.find("context of 48 tokens is full"), std::string::npos) << full.err;
  EXPECT_NE(full.err.find("mcullm: error:"), std::string::npos) << full.err;
}

TEST(CliChat, TemplateFromGgufMetadata) {
  const std::string dir = test::temp_dir();
  ASSERT_EQ(run_cli({"dummy", "-o", dir + "/chat.gguf", "--dim", "32", "--hidden", "64", "--layers", "2", "--heads", "4",
                     "--kv-heads", "2", "--seq-len", "256", "--chat-template",
                     "{% for m in messages %}{{'<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n'}}{% endfor %}"})
                .exit_code,
            0);
  const auto r = run_cli({"run", "-m", dir + "/chat.gguf", "-cnv", "-n", "8", "--temp", "0"}, "Hi\nAgain\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("chat template chatml"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("turn 2: fed"), std::string::npos) << r.err;
  // A template we do not implement: a clear error naming the override.
  ASSERT_EQ(run_cli({"dummy", "-o", dir + "/gemma.gguf", "--dim", "32", "--hidden", "64", "--layers", "1", "--heads", "4",
                     "--kv-heads", "2", "--seq-len", "64", "--chat-template", "<start_of_turn>user"})
                .exit_code,
            0);
  const auto g = run_cli({"run", "-m", dir + "/gemma.gguf", "-cnv"}, "Hi\n");
  EXPECT_NE(g.exit_code, 0);
  EXPECT_NE(g.err.find("--chat-template"), std::string::npos) << g.err;
  const auto forced = run_cli({"run", "-m", dir + "/gemma.gguf", "-cnv", "--chat-template", "llama2", "-n", "4"}, "Hi\n");
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
}

}  // namespace
}  // namespace mcullm

// Chat templates: renderings equal what the templates' published Jinja gives (rendered with
// Python's jinja2 from Qwen's tokenizer_config.json and Llama-2-chat's tokenizer_config.json, the
// strings pasted below), detection from Jinja text and GGUF metadata, incremental pieces that add up
// to the full rendering, and encoding with the markers as control tokens.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"
#include "core/arena.h"
#include "format/gguf_writer_host.h"
#include "tokenizer/chat_template_host.h"
#include "load/tokenizer_loader_host.h"

namespace mcullm {
namespace {

using test::read_text;
using test::shared_path;

const std::vector<ChatMessage> kOne = {{"user", "Hello"}};
const std::vector<ChatMessage> kSys = {{"system", "You are terse."}, {"user", "Hi there"}};
const std::vector<ChatMessage> kMulti = {
    {"system", "Be kind."}, {"user", "What is 2+2?"}, {"assistant", "4"}, {"user", " And 3+3? \n"}};

std::string render(ChatTemplateKind kind, const std::vector<ChatMessage>& m, bool gen) {
  std::string out;
  const Status st = ChatTemplate(kind).render(m, gen, &out);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

TEST(ChatTemplate, ChatMLMatchesQwenJinja) {
  const auto k = ChatTemplateKind::kChatML;
  EXPECT_EQ(render(k, kOne, false), "<|im_start|>user\nHello<|im_end|>\n");
  EXPECT_EQ(render(k, kOne, true), "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(k, kSys, true),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(k, kMulti, false),
            "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
            "<|im_start|>user\n And 3+3? \n<|im_end|>\n");
  EXPECT_EQ(render(k, kMulti, true),
            "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
            "<|im_start|>user\n And 3+3? \n<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama2MatchesLlama2ChatJinja) {
  const auto k = ChatTemplateKind::kLlama2;
  EXPECT_EQ(render(k, kOne, false), "<s>[INST] Hello [/INST]");
  EXPECT_EQ(render(k, kOne, true), "<s>[INST] Hello [/INST]");  // the template has no generation prompt
  EXPECT_EQ(render(k, kSys, true), "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi there [/INST]");
  EXPECT_EQ(render(k, kMulti, true),
            "<s>[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\nWhat is 2+2? [/INST] 4 </s><s>[INST] And 3+3? [/INST]");
}

TEST(ChatTemplate, RefusesWhatTheTemplatesRefuse) {
  std::string out;
  const ChatTemplate llama2(ChatTemplateKind::kLlama2);
  const ChatTemplate chatml(ChatTemplateKind::kChatML);
  EXPECT_EQ(llama2.render({{"user", "a"}, {"user", "b"}}, true, &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(llama2.render({{"assistant", "a"}}, true, &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(llama2.render({{"user", "a"}, {"system", "b"}}, true, &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(llama2.render({{"tool", "a"}}, true, &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(chatml.render({{"robot", "a"}}, true, &out).code(), Code::kInvalidArgument);
  EXPECT_TRUE(chatml.render({}, true, &out).ok());
  EXPECT_EQ(out, "<|im_start|>assistant\n");
  EXPECT_EQ(chatml.continue_conversation({{"system", "s"}}, true, false, &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(chatml.continue_conversation({}, true, false, &out).code(), Code::kInvalidArgument);
}

TEST(ChatTemplate, ByNameAndDetection) {
  ChatTemplate t;
  ASSERT_TRUE(ChatTemplate::by_name("llama2", &t).ok());
  EXPECT_EQ(t.kind(), ChatTemplateKind::kLlama2);
  ASSERT_TRUE(ChatTemplate::by_name("chatml", &t).ok());
  EXPECT_EQ(t.kind(), ChatTemplateKind::kChatML);
  EXPECT_STREQ(t.name(), "chatml");
  const Status bad = ChatTemplate::by_name("vicuna", &t);
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(std::string(bad.message()).find("chatml, llama2"), std::string::npos) << bad.message();

  MC_REQUIRE_SHARED();
  const auto config = nlohmann::json::parse(read_text(shared_path("tokenizers/qwen/tokenizer_config.json")));
  ASSERT_TRUE(ChatTemplate::detect(config.at("chat_template").get<std::string>(), &t).ok());
  EXPECT_EQ(t.kind(), ChatTemplateKind::kChatML);
  // Llama-2-chat's published template (abridged to its markers' context).
  ASSERT_TRUE(ChatTemplate::detect("{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% set content = '<<SYS>>\\n' + "
                                   "system_message + '\\n<</SYS>>\\n\\n' %}",
                                   &t)
                  .ok());
  EXPECT_EQ(t.kind(), ChatTemplateKind::kLlama2);
  // Mistral's [INST] without <<SYS>>, Gemma's turns, and junk: not ours, a clear error.
  for (const char* other : {"{{ '[INST] ' + message['content'] + ' [/INST]' }}", "<start_of_turn>user\n", "", "\xff\xfe"}) {
    const Status st = ChatTemplate::detect(other, &t);
    EXPECT_EQ(st.code(), Code::kUnsupported) << other;
    EXPECT_NE(std::string(st.message()).find("--chat-template"), std::string::npos) << st.message();
  }
}

// A GGUF file parsed from a writer's bytes (the bytes and the arena live as long as the object).
struct OpenGguf {
  explicit OpenGguf(const GgufWriter& w) : bytes(w.to_bytes()), buf(1 << 16), arena(Tier::kHost, buf.data(), buf.size()) {
    const Status st = file.open(bytes.data(), bytes.size(), arena);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  std::vector<uint8_t> bytes, buf;
  Arena arena;
  GgufFile file;
};

TEST(ChatTemplate, FromGgufMetadata) {
  ChatTemplate t;
  auto open = [](const GgufWriter& w, std::unique_ptr<OpenGguf>* g, GgufFile* f) {
    *g = std::make_unique<OpenGguf>(w);
    *f = (*g)->file;
  };
  std::unique_ptr<OpenGguf> g;
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  GgufFile f;
  open(w, &g, &f);
  EXPECT_EQ(ChatTemplate::from_gguf(f, &t).code(), Code::kNotFound);
  EXPECT_EQ(ChatTemplate::choose(&f, "", &t).code(), Code::kNotFound);
  EXPECT_EQ(ChatTemplate::choose(nullptr, "", &t).code(), Code::kNotFound);
  ASSERT_TRUE(ChatTemplate::choose(&f, "llama2", &t).ok());  // the override wins
  EXPECT_EQ(t.kind(), ChatTemplateKind::kLlama2);

  w.set_string("tokenizer.chat_template", "{% for m in messages %}<|im_start|>{{ m.role }}\n{% endfor %}");
  open(w, &g, &f);
  ASSERT_TRUE(ChatTemplate::choose(&f, "", &t).ok());
  EXPECT_EQ(t.kind(), ChatTemplateKind::kChatML);
  ASSERT_TRUE(ChatTemplate::choose(&f, "llama2", &t).ok());
  EXPECT_EQ(t.kind(), ChatTemplateKind::kLlama2);

  w.set_u32("tokenizer.chat_template", 7);  // wrong type: an error, not a guess
  open(w, &g, &f);
  EXPECT_FALSE(ChatTemplate::from_gguf(f, &t).ok());
}

// A conversation fed turn by turn (continue_conversation + the model's replies + the end-of-turn
// token) is the same text as the whole conversation rendered at once.
TEST(ChatTemplate, IncrementalPiecesAddUpToTheFullRendering) {
  for (const auto kind : {ChatTemplateKind::kChatML, ChatTemplateKind::kLlama2}) {
    const ChatTemplate t(kind);
    const bool llama2 = kind == ChatTemplateKind::kLlama2;
    // What the model writes for the reply "4" (Llama-2 replies start after " [/INST]" and the
    // template puts " 4 " before EOS).
    const std::string reply = llama2 ? " 4 " : "4";
    std::string piece, text;
    ASSERT_TRUE(t.continue_conversation({kMulti[0], kMulti[1]}, true, false, &piece).ok());
    text += piece + reply + t.end_of_turn_text();
    ASSERT_TRUE(t.continue_conversation({kMulti[3]}, false, true, &piece).ok());
    text += piece;
    EXPECT_EQ(text, render(kind, kMulti, true)) << t.name();
    // A reply cut short (no end-of-turn token fed): the closing is written out.
    text.clear();
    ASSERT_TRUE(t.continue_conversation({kMulti[0], kMulti[1]}, true, false, &piece).ok());
    text += piece + (llama2 ? " 4" : "4");
    ASSERT_TRUE(t.continue_conversation({kMulti[3]}, false, false, &piece).ok());
    text += piece;
    EXPECT_EQ(text, render(kind, kMulti, true)) << t.name();
  }
}

std::unique_ptr<Tokenizer> load(const std::string& relative) {
  std::unique_ptr<Tokenizer> tok;
  const Status st = load_tokenizer_file(shared_path(relative), &tok);
  EXPECT_TRUE(st.ok()) << st.message();
  return tok;
}

TEST(ChatFormat, QwenMarkersAreControlTokens) {
  MC_REQUIRE_SHARED();
  const auto tok = load("tokenizers/qwen/tokenizer.json");
  ASSERT_TRUE(tok);
  const ChatFormat f(ChatTemplate(ChatTemplateKind::kChatML), *tok);
  const std::string text = render(ChatTemplateKind::kChatML, kMulti, true);
  std::vector<int> ids, expected;
  ASSERT_TRUE(f.encode(text, &ids).ok());
  // The tokenizer's own special-token parsing (tokenizer.json's added tokens) agrees.
  EncodeOptions eo;
  eo.parse_special = true;
  ASSERT_TRUE(tok->encode(text, eo, &expected).ok());
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(ids.front(), 151644);  // <|im_start|> in Qwen2's vocabulary
  EXPECT_EQ(f.end_of_turn_token(), 151645);  // <|im_end|>
  EXPECT_TRUE(f.is_end_of_turn(151645));
  EXPECT_TRUE(f.is_end_of_turn(tok->eos_id()));
  EXPECT_FALSE(f.is_end_of_turn(ids[1]));
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(ChatFormat, Llama2UsesBosAndEosIds) {
  MC_REQUIRE_SHARED();
  const auto tok = load("tokenizers/llama2-32k/tokenizer.bin");
  ASSERT_TRUE(tok);
  const ChatFormat f(ChatTemplate(ChatTemplateKind::kLlama2), *tok);
  std::vector<int> ids;
  ASSERT_TRUE(f.encode("<s>[INST] Hello [/INST] Hi </s><s>[INST]", &ids).ok());
  // Llama-2-chat prompts as Meta's tokenizer encodes them: <s> "▁[" "INST" "]" "▁Hello" "▁[" "/" "INST" "]".
  const std::vector<int> head = {1, 518, 25580, 29962, 15043, 518, 29914, 25580, 29962};
  ASSERT_GE(ids.size(), head.size() + 4);
  EXPECT_EQ(std::vector<int>(ids.begin(), ids.begin() + head.size()), head);
  const std::vector<int> tail = {2, 1, 518, 25580, 29962};
  EXPECT_EQ(std::vector<int>(ids.end() - tail.size(), ids.end()), tail);
  EXPECT_EQ(f.end_of_turn_token(), 2);
  EXPECT_TRUE(f.is_end_of_turn(2));
}

TEST(ChatFormat, VocabularyWithoutMarkersSpellsThemAsText) {
  MC_REQUIRE_SHARED();
  const auto tok = load("models/stories260K/tok512.bin");
  ASSERT_TRUE(tok);
  const ChatFormat f(ChatTemplate(ChatTemplateKind::kChatML), *tok);
  EXPECT_EQ(f.end_of_turn_token(), -1);
  // EOS, and BOS (llama2.c models end a story with it), still end a turn.
  EXPECT_TRUE(f.is_end_of_turn(tok->eos_id()));
  EXPECT_TRUE(f.is_end_of_turn(tok->bos_id()));
  std::vector<int> ids, plain;
  ASSERT_TRUE(f.encode("<|im_start|>user\nHi", &ids).ok());
  ASSERT_TRUE(tok->encode("<|im_start|>user\nHi", EncodeOptions{}, &plain).ok());
  EXPECT_EQ(ids, plain);
}

}  // namespace
}  // namespace mcullm

// Tokenizer::from_hf_json: a Hugging Face tokenizer.json with a byte-level BPE model, plus
// tokenizer_config.json beside it (when present) for BOS/EOS, add_bos/add_eos and the chat
// template.
//
// Supported: model.type "BPE" (merges as "a b" strings or ["a", "b"] pairs, ignore_merges),
// added_tokens, no normalizer, and a pre-tokenizer made of ByteLevel, Split(Regex|String,
// behavior "Isolated") and Digits, alone or in a Sequence. Anything else is refused with
// Error(kUnimplemented) naming the field, rather than tokenized differently from the model.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_io.h"
#include "core/json_text.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/pretokenizer_regex.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/vocab.h"

namespace kvplan {
namespace {

using nlohmann::json;

// Context for error messages: the file and the JSON path of the field being read.
struct Reader {
  std::string file;

  [[noreturn]] void bad(const std::string& field, const std::string& what) const {
    fail(ErrorCode::kInvalidArgument, "{}: field '{}': {}", file, field, what);
  }
  [[noreturn]] void unsupported(const std::string& field, const std::string& what) const {
    fail(ErrorCode::kUnimplemented, "{}: field '{}': {}", file, field, what);
  }
  const json& member(const json& obj, const char* key, const std::string& field) const {
    if (!obj.is_object() || !obj.contains(key)) bad(field, "missing");
    return obj.at(key);
  }
  std::string string(const json& v, const std::string& field) const {
    if (!v.is_string()) bad(field, "expected a string, got " + std::string(v.type_name()));
    return v.get<std::string>();
  }
  bool boolean(const json& obj, const char* key, bool fallback, const std::string& field) const {
    if (!obj.is_object() || !obj.contains(key) || obj.at(key).is_null()) return fallback;
    if (!obj.at(key).is_boolean()) bad(field + "." + key, "expected true or false");
    return obj.at(key).get<bool>();
  }
};

// Adds the regex stages of one pre-tokenizer; sets `byte_level` when it is ByteLevel.
void add_pretokenizer(const Reader& r, const json& pre, const std::string& field,
                      BpeOptions& options, bool& byte_level) {
  const std::string type = r.string(r.member(pre, "type", field), field + ".type");
  if (type == "Sequence") {
    const json& list = r.member(pre, "pretokenizers", field);
    if (!list.is_array()) r.bad(field + ".pretokenizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      add_pretokenizer(r, list[i], field + ".pretokenizers[" + std::to_string(i) + "]", options,
                       byte_level);
    }
  } else if (type == "ByteLevel") {
    byte_level = true;
    options.add_prefix_space = r.boolean(pre, "add_prefix_space", false, field);
    if (r.boolean(pre, "use_regex", true, field)) options.pre_patterns.push_back(kGpt2SplitPattern);
  } else if (type == "Split") {
    const json& pattern = r.member(pre, "pattern", field);
    std::string regex;
    if (pattern.contains("Regex")) {
      regex = r.string(pattern.at("Regex"), field + ".pattern.Regex");
    } else if (pattern.contains("String")) {
      // A literal: quote it for PCRE2.
      regex = "\\Q" + r.string(pattern.at("String"), field + ".pattern.String") + "\\E";
    } else {
      r.bad(field + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
    }
    const std::string behavior = r.string(r.member(pre, "behavior", field), field + ".behavior");
    if (behavior != "Isolated") {
      r.unsupported(field + ".behavior", "'" + behavior + "' is not supported (only Isolated)");
    }
    if (r.boolean(pre, "invert", false, field)) r.unsupported(field + ".invert", "true");
    try {  // compiled here as well, so that a bad pattern names the file and the field
      (void)SplitRegex(regex);
    } catch (const Error& e) {
      r.bad(field + ".pattern", e.what());
    }
    options.pre_patterns.push_back(regex);
  } else if (type == "Digits") {
    options.pre_patterns.push_back(r.boolean(pre, "individual_digits", false, field) ? R"(\p{N})"
                                                                                     : R"(\p{N}+)");
  } else {
    r.unsupported(field + ".type", "pre-tokenizer '" + type +
                                       "' is not supported (ByteLevel, Split, Digits, Sequence)");
  }
}

// "<s>" or {"content": "<s>", ...} as tokenizer_config.json writes special tokens.
std::optional<std::string> config_token(const Reader& r, const json& config, const char* key) {
  if (!config.contains(key) || config.at(key).is_null()) return std::nullopt;
  const json& v = config.at(key);
  if (v.is_object()) return r.string(r.member(v, "content", key), std::string(key) + ".content");
  return r.string(v, key);
}

std::optional<int32_t> token_id_of(const Reader& r, const Vocab& vocab, const std::string& text,
                                   const std::string& field) {
  const std::optional<int32_t> id = vocab.find(text);
  if (!id) r.bad(field, "'" + text + "' is not a token of the vocabulary");
  return id;
}

// The chat template: a string, or a list of {"name", "template"} from which "default" is taken.
std::string config_chat_template(const Reader& r, const json& config) {
  if (!config.contains("chat_template") || config.at("chat_template").is_null()) return {};
  const json& v = config.at("chat_template");
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    for (const json& entry : v) {
      if (entry.is_object() && entry.value("name", "") == "default") {
        return r.string(r.member(entry, "template", "chat_template[]"), "chat_template[].template");
      }
    }
    return {};
  }
  r.bad("chat_template", "expected a string or a list of {name, template}");
}

// tokenizer.json's TemplateProcessing post-processor puts BOS first for Llama 3-style models.
bool post_processor_adds_bos(const json& root, const Vocab& vocab) {
  if (!vocab.bos_id || !root.contains("post_processor")) return false;
  const json& pp = root.at("post_processor");
  const json* single = nullptr;
  if (pp.is_object() && pp.value("type", "") == "TemplateProcessing" && pp.contains("single")) {
    single = &pp.at("single");
  }
  if (single == nullptr || !single->is_array() || single->empty()) return false;
  const json& first = single->front();
  if (!first.is_object() || !first.contains("SpecialToken")) return false;
  const json& st = first.at("SpecialToken");
  return st.is_object() && st.value("id", "") == vocab.text(*vocab.bos_id);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_hf_json(const std::filesystem::path& tokenizer_json) {
  const std::string text = read_text_file(tokenizer_json);
  const std::filesystem::path config_path = tokenizer_json.parent_path() / "tokenizer_config.json";
  std::error_code ec;
  const std::string config_text =
      std::filesystem::exists(config_path, ec) ? read_text_file(config_path) : std::string();
  return from_hf_json_text(text, config_text, tokenizer_json.string());
}

std::unique_ptr<Tokenizer> Tokenizer::from_hf_json_text(std::string_view tokenizer_text,
                                                        std::string_view config_text,
                                                        const std::string& source) {
  const json root = parse_json_text(tokenizer_text, source);
  const Reader r{source};
  const json& model = r.member(root, "model", "model");
  const std::string type = r.string(r.member(model, "type", "model"), "model.type");
  if (type != "BPE") {
    r.unsupported("model.type", "'" + type + "' is not supported (only BPE)");
  }
  if (r.boolean(model, "byte_fallback", false, "model")) {
    r.unsupported("model.byte_fallback", "SentencePiece-style BPE is only supported from GGUF");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model.at(key).is_string() &&
        !model.at(key).get<std::string>().empty()) {
      r.unsupported(std::string("model.") + key, "not supported for byte-level BPE");
    }
  }
  if (root.contains("normalizer") && !root.at("normalizer").is_null()) {
    r.unsupported("normalizer", "normalizers are not supported (expected null)");
  }

  // Vocabulary: model.vocab {token: id} plus added_tokens [{id, content, special}].
  Vocab vocab;
  vocab.source = source;
  const json& vocab_json = r.member(model, "vocab", "model");
  if (!vocab_json.is_object() || vocab_json.empty())
    r.bad("model.vocab", "expected a non-empty object");
  const json added = root.contains("added_tokens") ? root.at("added_tokens") : json::array();
  if (!added.is_array()) r.bad("added_tokens", "expected an array");
  int64_t max_id = -1;
  // The vocabulary tables are sized by the largest id: an id must also be below the file's size
  // (real vocabularies are dense, so their ids always are), or a few bytes would allocate 2^24
  // entries.
  const int64_t id_limit =
      std::min<int64_t>(int64_t{1} << 24, std::max<size_t>(tokenizer_text.size(), 256));
  auto check_id = [&](const json& id, const std::string& field) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= id_limit) {
      r.bad(field, fmt::format("expected a token id in 0..{} (2^24 and the file's size), got {}",
                               id_limit - 1, json_excerpt(id)));
    }
    max_id = std::max(max_id, id.get<int64_t>());
    return static_cast<size_t>(id.get<int64_t>());
  };
  for (const auto& [text, id] : vocab_json.items()) check_id(id, "model.vocab['" + text + "']");
  for (size_t i = 0; i < added.size(); ++i) {
    check_id(r.member(added[i], "id", "added_tokens[" + std::to_string(i) + "]"),
             "added_tokens[" + std::to_string(i) + "].id");
  }
  const size_t n = static_cast<size_t>(max_id + 1);
  vocab.tokens.assign(n, std::string());
  vocab.types.assign(n, TokenType::kUnused);  // ids no entry names stay unused
  std::vector<bool> seen(n, false);
  for (const auto& [text, id] : vocab_json.items()) {
    const size_t i = id.get<size_t>();
    if (seen[i]) r.bad("model.vocab['" + text + "']", "id " + std::to_string(i) + " is used twice");
    seen[i] = true;
    vocab.tokens[i] = text;
    vocab.types[i] = TokenType::kNormal;
  }
  for (size_t k = 0; k < added.size(); ++k) {
    const std::string field = "added_tokens[" + std::to_string(k) + "]";
    const size_t i = added[k].at("id").get<size_t>();
    const std::string content = r.string(r.member(added[k], "content", field), field + ".content");
    if (seen[i] && vocab.tokens[i] != content) {
      r.bad(field, "id " + std::to_string(i) + " is '" + vocab.tokens[i] +
                       "' in model.vocab but '" + content + "' here");
    }
    seen[i] = true;
    vocab.tokens[i] = content;
    vocab.types[i] = r.boolean(added[k], "special", false, field) ? TokenType::kControl
                                                                  : TokenType::kUserDefined;
  }
  vocab.build_index();

  // Merges: "a b" strings (older files) or ["a", "b"] pairs (tokenizers >= 0.20).
  const json& merges_json = r.member(model, "merges", "model");
  if (!merges_json.is_array()) r.bad("model.merges", "expected an array");
  std::vector<BpeMerge> merges;
  merges.reserve(merges_json.size());
  for (size_t i = 0; i < merges_json.size(); ++i) {
    const json& m = merges_json[i];
    const std::string field = "model.merges[" + std::to_string(i) + "]";
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      const size_t space = line.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
          line.find(' ', space + 1) != std::string::npos) {
        r.bad(field, "'" + line + "': expected two tokens separated by one space");
      }
      merges.push_back({line.substr(0, space), line.substr(space + 1)});
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.push_back({m[0].get<std::string>(), m[1].get<std::string>()});
    } else {
      r.bad(field, "expected \"a b\" or [\"a\", \"b\"], got " + json_excerpt(m));
    }
  }

  BpeOptions options;
  options.ignore_merges = r.boolean(model, "ignore_merges", false, "model");
  bool byte_level = false;
  if (!root.contains("pre_tokenizer") || root.at("pre_tokenizer").is_null()) {
    r.unsupported("pre_tokenizer", "missing; kvplan needs a ByteLevel pre-tokenizer");
  }
  add_pretokenizer(r, root.at("pre_tokenizer"), "pre_tokenizer", options, byte_level);
  if (!byte_level) {
    r.unsupported("pre_tokenizer", "no ByteLevel step; only byte-level BPE is supported");
  }

  // tokenizer_config.json beside it: BOS/EOS, add_bos/add_eos, chat template.
  const std::string config_source =
      (std::filesystem::path(source).parent_path() / "tokenizer_config.json").string();
  std::optional<bool> add_bos;
  if (!config_text.empty()) {
    const json config = parse_json_text(config_text, config_source);
    const Reader c{config_source};
    if (!config.is_object()) c.bad("(root)", "expected an object");
    if (auto bos = config_token(c, config, "bos_token")) {
      vocab.bos_id = token_id_of(c, vocab, *bos, "bos_token");
    }
    if (auto eos = config_token(c, config, "eos_token")) {
      vocab.eos_id = token_id_of(c, vocab, *eos, "eos_token");
    }
    if (auto unk = config_token(c, config, "unk_token")) {
      vocab.unk_id = token_id_of(c, vocab, *unk, "unk_token");
    }
    if (config.contains("add_bos_token") && !config.at("add_bos_token").is_null()) {
      add_bos = c.boolean(config, "add_bos_token", false, "(root)");
    }
    vocab.add_eos = c.boolean(config, "add_eos_token", false, "(root)");
    vocab.chat_template = config_chat_template(c, config);
  }
  vocab.add_bos = add_bos.value_or(post_processor_adds_bos(root, vocab));
  return std::make_unique<BpeTokenizer>(std::move(vocab), merges, options, "field 'model.merges'");
}

}  // namespace kvplan

def sub(p, a, b, cnt=1):
    p='/work/wt-tf/'+p
    s=open(p).read()
    if a not in s: raise SystemExit(f"not found in {p}: {a[:70]}")
    s=s.replace(a,b,cnt); open(p,'w').write(s)
# LoadedModel: the row
sub('src/host/model_loader.h','#include "model/decoder.h"\n','#include "model/arch.h"\n#include "model/decoder.h"\n')
sub('src/host/model_loader.h','''  bool has_head_groups = false;
};''','''  bool has_head_groups = false;
  // The architecture's row (model/arch.h); every name `arch` takes has one.
  const ArchInfo& info() const { return *arch_info(arch.c_str()); }
  bool transformer() const { return info().family == ArchFamily::kTransformer; }
};''')
p='src/host/model_loader.cpp'
sub(p,'''      if (m->arch != "llama" && m->arch != "ple")''','''      if (!m->info().head_groups)''')
sub(p,'''m->arch == "ple" ? m->ple.output : m->model.output''','''m->info().family == ArchFamily::kPle ? m->ple.output : m->model.output''')
sub(p,'''  if (m.arch == "bitnet-llama2c") {
    auto bit''','''  if (m.info().family == ArchFamily::kBitLlama2c) {
    auto bit''')
sub(p,'''  if (m.arch == "ple") {
    auto ple''','''  if (m.info().family == ArchFamily::kPle) {
    auto ple''')
sub(p,'''  if (m.arch == "bitnet-llama2c") for_each_tl_in(m.bitnet.layers, m.bitnet.cfg.n_layers, fn);
  if (m.arch != "bitnet-llama2c" && m.arch != "ple") for_each_tl_in''','''  if (m.info().family == ArchFamily::kBitLlama2c) for_each_tl_in(m.bitnet.layers, m.bitnet.cfg.n_layers, fn);
  if (m.transformer()) for_each_tl_in''')
p='src/host/board_image_export.cpp'
sub(p,'''  if (m.arch == "bitnet-llama2c") {
    const BitLlama2cModel& b''','''  const ArchInfo& info = m.info();
  if (info.family == ArchFamily::kBitLlama2c) {
    const BitLlama2cModel& b''')
sub(p,'''  } else if (m.arch == "llama" || m.arch == "bitnet" || m.arch == "bitnet-25" || m.arch == "qwen2") {''','''  } else if (m.transformer()) {''')
sub(p,'''    const BoardArch arch = m.arch == "llama"    ? BoardArch::kLlama
                           : m.arch == "qwen2"  ? BoardArch::kQwen2
                           : m.arch == "bitnet" ? BoardArch::kBitnet
                                                : BoardArch::kBitnet25;
    fill_config(b.cfg, arch, tied, &cfg);''','''    fill_config(b.cfg, static_cast<BoardArch>(info.board_arch), tied, &cfg);''')
sub(p,'''  } else if (m.arch == "ple") {
    const PleModel& b''','''  } else if (info.family == ArchFamily::kPle) {
    const PleModel& b''')
p='src/host/cost_model.cpp'
sub(p,'''  if (m.arch == "llama" || m.arch == "bitnet" || m.arch == "bitnet-25" || m.arch == "qwen2") {''','''  if (m.transformer()) {''')
sub(p,'''  } else if (m.arch == "bitnet-llama2c") {
    const BitLlama2cModel& x''','''  } else if (m.info().family == ArchFamily::kBitLlama2c) {
    const BitLlama2cModel& x''')
sub(p,'''  } else if (m.arch == "ple") {
    const PleModel& x''','''  } else if (m.info().family == ArchFamily::kPle) {
    const PleModel& x''')
p='src/cluster/slice_source_host.cpp'
sub(p,'''  if (s->lm_->arch != "llama" && s->lm_->arch != "qwen2")''','''  if (!s->lm_->info().slices)''')
sub('src/cluster/slice_source_host.h','''  bool qwen2() const { return part_ || lm_->arch == "qwen2"; }''','''  bool qwen2() const { return part_ || lm_->info().spec.qkv_bias; }''')
# board image: family from the row
p='src/format/board_image_model.cpp'
sub(p,'''  switch (out->arch) {
    case BoardArch::kLlama:
    case BoardArch::kBitnet:
    case BoardArch::kBitnet25:
    case BoardArch::kQwen2: return transformer_from_image(img, cfg, tables, out);
    case BoardArch::kBitLlama2c: {''','''  const ArchInfo* info = arch_info_by_board(static_cast<uint32_t>(out->arch));
  if (info && info->family == ArchFamily::kTransformer) return transformer_from_image(img, cfg, tables, out);
  switch (out->arch) {
    case BoardArch::kBitLlama2c: {''')
sub(p,'''    case BoardArch::kPle: return ple_from_image(img, cfg, tables, out);
  }
  return Status::Error''','''    case BoardArch::kPle: return ple_from_image(img, cfg, tables, out);
    default: break;
  }
  return Status::Error''')
sub(p,'''  switch (model.arch) {
    case BoardArch::kLlama:
    case BoardArch::kBitnet:
    case BoardArch::kBitnet25:
    case BoardArch::kQwen2:
      MC_TRY(transformer_.init(&model.transformer, ctx_len, work, pool, kernels));
      active_ = &transformer_;
      break;
    case BoardArch::kBitLlama2c:''','''  const ArchInfo* info = arch_info_by_board(static_cast<uint32_t>(model.arch));
  if (info && info->family == ArchFamily::kTransformer) {
    MC_TRY(transformer_.init(&model.transformer, ctx_len, work, pool, kernels));
    active_ = &transformer_;
    return Status::Ok();
  }
  switch (model.arch) {
    case BoardArch::kBitLlama2c:''')
sub(p,'''      active_ = &ple_;
      break;
  }''','''      active_ = &ple_;
      break;
    default: break;
  }''')
sub(p,'''  switch (out->arch) {
    case BoardArch::kBitnet:
    case BoardArch::kBitnet25:
      m.spec = bitnet_spec(false);
      m.spec.act = ic.ffn ? FfnAct::kReluSqr : FfnAct::kSilu;
      m.spec.rope = static_cast<RopeStyle>(ic.rope);
      break;
    case BoardArch::kQwen2: {
      const BoardImageTensor* wq = img.find(board_tensor_id(BoardRole::kWq, 0));
      m.spec = qwen2_spec(wq && static_cast<DType>(wq->dtype) == DType::kI2_S);
      break;
    }
    default: m.spec = llama_spec(ic.ffn ? FfnAct::kRelu : FfnAct::kSilu);  // ReLU runs dense here (no f32 down copy)
  }''','''  m.spec = arch_info_by_board(static_cast<uint32_t>(out->arch))->spec;
  if (ic.ffn) m.spec.act = m.spec.ternary ? FfnAct::kReluSqr : FfnAct::kRelu;  // a dense ReLU here (no f32 down copy)
  if (m.spec.sub_norms) m.spec.rope = static_cast<RopeStyle>(ic.rope);
  if (m.spec.qkv_bias) {
    const BoardImageTensor* wq = img.find(board_tensor_id(BoardRole::kWq, 0));
    m.spec.ternary = wq && static_cast<DType>(wq->dtype) == DType::kI2_S;
  }''')
sub('src/format/board_image_model.h','#include "model/bitnet.h"\n','#include "model/arch.h"\n#include "model/bitnet.h"\n')
p='src/board/mapped_model.cpp'
sub(p,'''  const BoardArch a = model_.arch;
  if (a != BoardArch::kLlama && a != BoardArch::kBitnet && a != BoardArch::kBitnet25 && a != BoardArch::kQwen2)''','''  const ArchInfo* info = arch_info_by_board(static_cast<uint32_t>(model_.arch));
  if (!info || info->family != ArchFamily::kTransformer)''')

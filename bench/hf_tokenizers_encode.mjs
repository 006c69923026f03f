// Encoding speed of Hugging Face's tokenizers.js (@huggingface/tokenizers, pure JS) on node, for
// bench/compare_hf_tokenizers.sh. Usage:
//   node bench/hf_tokenizers_encode.mjs PACKAGE_DIR tokenizer.json tokenizer_config.json text.txt REPS IDS_OUT
// PACKAGE_DIR holds node_modules/@huggingface/tokenizers. Prints one line of figures; writes the ids
// (space separated, one line) to IDS_OUT so the script can compare them with ours.
import fs from "fs";
import path from "path";
import { pathToFileURL } from "url";

const [pkgDir, tokJson, tokConfig, textFile, repsArg, idsOut] = process.argv.slice(2);
const mod = await import(pathToFileURL(path.join(pkgDir, "node_modules/@huggingface/tokenizers/dist/tokenizers.mjs")).href);
const heap0 = process.memoryUsage().heapUsed;
const t0 = performance.now();
const tok = new mod.Tokenizer(JSON.parse(fs.readFileSync(tokJson, "utf8")), JSON.parse(fs.readFileSync(tokConfig, "utf8")));
const loadMs = performance.now() - t0;
globalThis.gc?.();
const vocabMiB = (process.memoryUsage().heapUsed - heap0) / (1 << 20);
const text = fs.readFileSync(textFile, "utf8");
const bytes = Buffer.byteLength(text, "utf8");
let best = Infinity, ids = null;
for (let r = 0; r < Number(repsArg); ++r) {
  const t = process.cpuUsage();  // CPU time, as Google Benchmark's rate on our side (busy machines)
  ids = tok.encode(text, { add_special_tokens: false }).ids;
  const d = process.cpuUsage(t);
  best = Math.min(best, (d.user + d.system) / 1000);
}
fs.writeFileSync(idsOut, ids.join(" ") + "\n");
console.log(`hf-tokenizers.js: ${(bytes / 1e6 / (best / 1000)).toFixed(2)} MB/s (best of ${repsArg}: cpu ${best.toFixed(1)} ms for ${bytes} bytes), ` +
            `${ids.length} tokens, load ${loadMs.toFixed(0)} ms, vocabulary heap ~${vocabMiB.toFixed(1)} MiB`);

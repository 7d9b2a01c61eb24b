// bench/peer/embed.mjs — llama.cpp (node-llama-cpp 3.21.1, CPU) computes the final hidden state
// of the last token of each token-id list: the outside reference for `toy serve --pooling last`'s
// /v1/embeddings (tests/test_serve.cpp, ServeEmbeddings). llama.cpp's own embedding context for a
// decoder (pooling "none") returns exactly that vector, unnormalised: the hidden state after the
// output norm (t_embd). The context is made as node-llama-cpp's createEmbeddingContext() makes
// it (`_embeddings`), but with an F32 KV cache and without flash attention: the default F16 cache
// would round the keys and values that toy keeps in F32, and the CPU flash-attention kernel
// rounds to F16 too (with it, the vectors differ from toy's by ~1e-3 relative; without, ~1e-7).
// The ids are fed as given (no BOS added).
// usage: node embed.mjs MODEL IDS [IDS...]     IDS: comma-separated, e.g. 1,450,2011
// Prints one JSON array of vectors.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, ...lists] = process.argv.slice(2);
if (!modelPath || lists.length === 0) {
  console.error("usage: node embed.mjs MODEL IDS [IDS...]");
  process.exit(2);
}
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
// One thread: see generate.mjs.
const context = await model.createContext({
  contextSize: 1024,
  threads: 1,
  _embeddings: true,
  flashAttention: false,
  experimentalKvCacheKeyType: "F32",
  experimentalKvCacheValueType: "F32",
});
const sequence = context.getSequence();
const vectors = [];
for (const list of lists) {
  const ids = list.split(",").map(Number);
  await sequence.eraseContextTokenRanges([{start: 0, end: sequence.nextTokenIndex}]);
  for await (const token of sequence.evaluate(ids, {_noSampling: true})) break;  // one pass over the ids
  vectors.push(Array.from(context._ctx.getEmbedding(ids.length)));
}
console.log(JSON.stringify(vectors));
await context.dispose();
await model.dispose();
await llama.dispose();

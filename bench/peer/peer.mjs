// bench/peer/peer.mjs — llama.cpp's CPU backend (node-llama-cpp 3.21.1 prebuilt binaries) on a
// GGUF, measured the way `toy bench` measures: pp512 = one 512-token batch from an empty cache,
// tg128 = 128 single-token steps after one token, median of REPS after a warm-up.
// usage: node peer.mjs MODEL THREADS N_VOCAB [REPS]
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, threadsArg, vocabArg, repsArg] = process.argv.slice(2);
const threads = Number(threadsArg ?? 2), nVocab = Number(vocabArg), reps = Number(repsArg ?? 3);
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const ids = (n, salt) => Array.from({length: n}, (_, i) => 3 + ((i + 1) * 7919 + salt * 104729) % (nVocab - 3));

const llama = await getLlama({gpu: false, build: "never", maxThreads: threads, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: 1024, batchSize: 512, sequences: 1, flashAttention: false,
                                           threads: {ideal: threads, min: threads}});
const seq = context.getSequence();

async function pp(n) {
  const v = [];
  for (let r = 0; r <= reps; ++r) {
    await seq.clearHistory();
    const t0 = performance.now();
    await seq.evaluateWithoutGeneratingNewTokens(ids(n, r));
    if (r) v.push(n / ((performance.now() - t0) / 1000));
  }
  return median(v);
}

async function tg(n) {
  const v = [];
  for (let r = 0; r <= reps; ++r) {
    await seq.clearHistory();
    await seq.evaluateWithoutGeneratingNewTokens(ids(1, r));
    const t0 = performance.now();
    let k = 0;
    for await (const _ of seq.evaluate(ids(1, r + 1), {temperature: 0})) if (++k >= n) break;
    if (r) v.push(n / ((performance.now() - t0) / 1000));
  }
  return median(v);
}

const result = {pp512: await pp(512), tg128: await tg(128), threads};
console.log(JSON.stringify(result));
await context.dispose();
await model.dispose();
await llama.dispose();

// bench/peer/peer_cpu.mjs — llama.cpp's CPU backend (node-llama-cpp 3.21.1) timed by CPU time, for
// a machine too loaded for wall-clock figures: the process's user + system seconds
// (process.cpuUsage, every thread) of a 512-token prompt from an empty cache and of 64 single-token
// steps, each after a warm-up. Prints JSON: tokens per CPU second, each repetition.
// usage: node peer_cpu.mjs MODEL THREADS N_VOCAB [REPS]
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, threadsArg, vocabArg, repsArg] = process.argv.slice(2);
const threads = Number(threadsArg ?? 1), nVocab = Number(vocabArg), reps = Number(repsArg ?? 2);
const ids = (n, salt) => Array.from({length: n}, (_, i) => 3 + ((i + 1) * 7919 + salt * 104729) % (nVocab - 3));
const cpuSeconds = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };

const llama = await getLlama({gpu: false, build: "never", maxThreads: threads, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: 1024, batchSize: 512, sequences: 1, flashAttention: false,
                                           threads: {ideal: threads, min: threads}});
const seq = context.getSequence();
const pp512 = [], tg64 = [];
for (let r = 0; r <= reps; ++r) {  // r == 0: the warm-up
  await seq.clearHistory();
  let t0 = cpuSeconds();
  await seq.evaluateWithoutGeneratingNewTokens(ids(512, r));
  if (r) pp512.push(512 / (cpuSeconds() - t0));
  await seq.clearHistory();
  await seq.evaluateWithoutGeneratingNewTokens(ids(1, r));
  t0 = cpuSeconds();
  let k = 0;
  for await (const _ of seq.evaluate(ids(1, r + 1), {temperature: 0})) if (++k >= 64) break;
  if (r) tg64.push(64 / (cpuSeconds() - t0));
}
console.log(JSON.stringify({pp512, tg64, threads, llama_cpp: llama.llamaCppRelease ?? null}));
await context.dispose();
await model.dispose();
await llama.dispose();

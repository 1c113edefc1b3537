#!/usr/bin/env node
// A real Mastra 1.71.0 HTTP server (@mastra/deployer's createNodeServer: the Hono app `mastra dev`
// runs, over @mastra/server's route handlers) whose storage is @mastra/pg's PostgresStore, for
// streamkit's shared-memory test. No network beyond PostgreSQL, no keys: the model is Mastra's
// own MastraLanguageModelV2Mock, which answers with what its prompt held, so the test can see
// what Mastra's memory recalled:
//   "Mastra recalled N: user: <text> | assistant: <text> | ..."   (every message before the
//   last user message, system messages left out), then " / now: <last user text>".
//
// Usage: node server.mjs --port 4111 --dsn postgresql://... --schema NAME
// Agent `echo`, memory: @mastra/memory Memory over the Mastra instance's PostgresStore,
// lastMessages 20, no semantic recall. Prints {"ready": true, "url": ...} once listening.
import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { MastraLanguageModelV2Mock, simulateReadableStream } from '@mastra/core/test-utils/llm-mock';
import { Memory } from '@mastra/memory';
import { PostgresStore } from '@mastra/pg';
import { createNodeServer } from '@mastra/deployer/server';

const argv = process.argv.slice(2);
const opt = (name, dflt) => { const i = argv.indexOf(`--${name}`); return i >= 0 ? argv[i + 1] : dflt; };
const PORT = Number(opt('port', 4111));
const HOST = '127.0.0.1';

function textOf(content) {
  if (typeof content === 'string') return content;
  return (content ?? []).filter((p) => p.type === 'text').map((p) => p.text).join('');
}

function replyFor(prompt) {
  const turns = prompt.filter((m) => m.role !== 'system');
  const last = turns[turns.length - 1];
  const history = turns.slice(0, -1).map((m) => `${m.role}: ${textOf(m.content)}`);
  return `Mastra recalled ${history.length}: ${history.join(' | ')} / now: ${textOf(last?.content)}`;
}

const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15 };
let n = 0;
const model = new MastraLanguageModelV2Mock({
  provider: 'mock-provider',
  modelId: 'mock-model-id',
  doGenerate: async ({ prompt }) => ({
    content: [{ type: 'text', text: replyFor(prompt) }], finishReason: 'stop', usage,
    warnings: [], request: {},
    response: { id: `resp-${++n}`, modelId: 'mock-model-id', timestamp: new Date(0) },
  }),
  doStream: async ({ prompt }) => ({
    stream: simulateReadableStream({
      chunks: [
        { type: 'stream-start', warnings: [] },
        { type: 'response-metadata', id: `resp-${++n}`, modelId: 'mock-model-id', timestamp: new Date(0) },
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: replyFor(prompt) },
        { type: 'text-end', id: 't' },
        { type: 'finish', finishReason: 'stop', usage },
      ],
      initialDelayInMs: null, chunkDelayInMs: null,
    }),
    request: {}, response: {}, warnings: [],
  }),
});

const storage = new PostgresStore({ id: 'pg', connectionString: opt('dsn'), schemaName: opt('schema') });
const agent = new Agent({
  id: 'echo',
  name: 'Echo',
  instructions: 'Repeat what you remember.',
  model,
  memory: new Memory({ options: { lastMessages: 20, semanticRecall: false } }),
});
const mastra = new Mastra({ agents: { echo: agent }, storage, logger: false,
                            server: { host: HOST, port: PORT } });
const server = await createNodeServer(mastra, { tools: {} });
process.on('SIGTERM', () => { server.close(); process.exit(0); });
console.log(JSON.stringify({ ready: true, url: `http://${HOST}:${PORT}` }));

// Drives a streamkit server with the real clients: @mastra/client-js and the AI SDK's
// DefaultChatTransport + readUIMessageStream. Usage: node clients.mjs BASE_URL
// Prints one JSON object with what each client saw; the Python test asserts on it.
// Anything a client logs with console.error (client-js logs, not throws, stream errors) is
// collected in "errors" so the test fails on it.
import { MastraClient } from "@mastra/client-js";
import { DefaultChatTransport, readUIMessageStream } from "ai";

const base = process.argv[2];
const errors = [];
console.error = (...args) => errors.push(args.map(String).join(" "));
const out = { errors };

// The server decides the caller's resource from this header (create_app(resource=...)), as an
// auth proxy would set it; client-js sends no resourceId when it reads a thread.
const client = new MastraClient({ baseUrl: base, retries: 0,
                                  headers: { "x-resource-id": "node-user" } });

const agents = await client.listAgents();
out.agents = Object.keys(agents);
const agent = client.getAgent("support");
out.details = await agent.details();

const generated = await agent.generate("Hello there");
out.generate = { text: generated.text, finishReason: generated.finishReason,
                 usage: generated.usage };

async function streamed(response) {
  const chunks = [];
  await response.processDataStream({ onChunk: async (chunk) => { chunks.push(chunk); } });
  return chunks;
}

const toolChunks = await streamed(await agent.stream("Where is my order? I'm customer C-42."));
const ends = toolChunks.filter((c) => c.type === "step-finish" || c.type === "finish");
out.toolTurn = {
  types: toolChunks.map((c) => c.type),
  // What client-js hands onChunk of each step end: its response metadata, as Mastra sends it.
  endMetadata: ends.map((c) => c.payload?.metadata),
  endKeys: ends.map((c) => Object.keys(c.payload ?? {}).sort()),
  call: toolChunks.find((c) => c.type === "tool-call")?.payload,
  result: toolChunks.find((c) => c.type === "tool-result")?.payload,
  progress: toolChunks.find((c) => c.type === "data-progress"),
  text: toolChunks.filter((c) => c.type === "text-delta").map((c) => c.payload.text).join(""),
  finish: toolChunks.at(-1)?.payload?.stepResult?.reason,
};

const memory = { thread: "node-thread", resource: "node-user" };
const turn1 = await streamed(await agent.stream("My name is Ada", { memory }));
const turn2 = await agent.generate("What is my name?", { memory });
out.memoryTurn = {
  first: turn1.filter((c) => c.type === "text-delta").map((c) => c.payload.text).join(""),
  second: turn2.text,
};
// The same memory by threadId/resourceId (client-js's other spelling), streamed both turns,
// then the thread read back through the client.
const ids = { threadId: "node-thread-2", resourceId: "node-user" };
const streamedText = (chunks) => chunks.filter((c) => c.type === "text-delta")
  .map((c) => c.payload.text).join("");
const idTurn1 = await streamed(await agent.stream("My name is Grace", ids));
const idTurn2 = await streamed(await agent.stream("What is my name?", ids));
const idThread = client.getMemoryThread({ threadId: ids.threadId, agentId: "support" });
out.idMemory = {
  first: streamedText(idTurn1),
  second: streamedText(idTurn2),
  finishes: [idTurn1, idTurn2].map((t) => t.at(-1)?.type),
  messages: (await idThread.listMessages()).messages.map((m) => ({
    role: m.role,
    text: (m.content?.parts ?? []).filter((p) => p.type === "text").map((p) => p.text).join(""),
  })),
};
const threads = await client.listMemoryThreads({ resourceId: "node-user", agentId: "support" });
const thread = client.getMemoryThread({ threadId: "node-thread", agentId: "support" });
out.memory = {
  threads: threads.threads.map((t) => t.id),
  thread: await thread.get(),
  roles: (await thread.listMessages()).messages.map((m) => m.role),
};

const intruder = new MastraClient({ baseUrl: base, retries: 0,
                                    headers: { "x-resource-id": "someone-else" } });
out.intruder = {};
for (const [name, read] of [
  ["thread", () => intruder.getMemoryThread({ threadId: "node-thread", agentId: "support" }).get()],
  ["messages", () => intruder.getMemoryThread({ threadId: "node-thread", agentId: "support" })
    .listMessages()],
  ["stream", () => intruder.getAgent("support").stream("What is my name?", { memory })],
]) {
  try {
    await read();
    out.intruder[name] = "no error";
  } catch (error) {
    out.intruder[name] = { status: error.status, body: error.body };
  }
}

try {
  await client.getAgent("nope").generate("hi");
  out.unknownAgent = "no error";
} catch (error) {
  out.unknownAgent = { status: error.status, body: error.body };
}

const transport = new DefaultChatTransport({ api: `${base}/chat/support` });
const messages = [];
out.chat = [];
for (const [index, text] of ["Hello", "Where is my order? I'm customer C-42.", "Thanks!"]
  .entries()) {
  messages.push({ id: `user-${index}`, role: "user", parts: [{ type: "text", text }] });
  const stream = await transport.sendMessages({
    chatId: "node-chat", messages, trigger: "submit-message", messageId: undefined,
    abortSignal: undefined,
  });
  let last;
  for await (const message of readUIMessageStream({ stream, terminateOnError: true })) {
    last = message;
  }
  messages.push(last);
  out.chat.push({
    role: last.role,
    parts: last.parts.map((p) => ({ type: p.type, state: p.state, text: p.text, input: p.input,
                                    output: p.output, data: p.data })),
  });
}

process.stdout.write(JSON.stringify(out));

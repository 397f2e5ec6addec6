// Clients nobody here wrote: Node's own fetch against the HTTP API, and the official TypeScript
// MCP SDK against the MCP server over streamable HTTP and over stdio. Run by
// tests/node/test_node_clients.py, which starts the server and hands the credentials in:
//   MEMORY_TEST_URL, MEMORY_TEST_AGENT, MEMORY_TEST_AGENT_KEY, MEMORY_TEST_TOM_TOKEN,
//   MEMORY_TEST_MEMORYCTL, MEMORY_TEST_STORE_URL
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const env = process.env;
const base = env.MEMORY_TEST_URL;
const agent = env.MEMORY_TEST_AGENT;
const agentKey = env.MEMORY_TEST_AGENT_KEY;
const tomToken = env.MEMORY_TEST_TOM_TOKEN;

async function connected(transport) {
  const client = new Client({ name: "node-test-client", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

function text(result) {
  return result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

test("fetch reads the context and searches with an agent key", async () => {
  const headers = { Authorization: `Bearer ${agentKey}` };
  const context = await fetch(`${base}/v1/agents/${agent}/sessions/s3-maya-followup/context?user_id=user-maya`,
    { headers });
  assert.equal(context.status, 200);
  assert.match(context.headers.get("content-type"), /xml/);
  assert.match(await context.text(), /Fridays/);

  const search = await fetch(`${base}/v1/agents/${agent}/sessions/s3-maya-followup/search`, {
    method: "POST", headers: { ...headers, "Content-Type": "application/json" },
    body: JSON.stringify({ query: "Where does Maya live now?", user_id: "user-maya" }),
  });
  assert.equal(search.status, 200);
  const { results } = await search.json();
  assert.ok(results.some((hit) => hit.content.includes("Porto")), JSON.stringify(results));
});

test("fetch with a user token cannot name another user, and the error says where", async () => {
  const answer = await fetch(`${base}/v1/agents/${agent}/sessions/s4-tom-av/context?user_id=user-maya`,
    { headers: { Authorization: `Bearer ${tomToken}` } });
  assert.equal(answer.status, 403);
  const problem = await answer.json();
  assert.equal(problem.where, "query user_id");
  assert.ok(problem.what && problem.why);
});

test("the TypeScript SDK over HTTP: a user token reads its own user only", async () => {
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${tomToken}` } },
  });
  const client = await connected(transport);
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ["get_memory_context", "remember", "search_memory"]);
    for (const tool of tools) assert.equal(tool.inputSchema.additionalProperties, false, tool.name);

    const refused = await client.callTool({ name: "search_memory", arguments: { query: "Maya email", user_id: "user-maya" } });
    assert.equal(refused.isError, true);
    assert.match(text(refused), /user_id/);

    const own = await client.callTool({ name: "search_memory", arguments: { query: "Tom AV engineer streams" } });
    assert.ok(!own.isError, text(own));
    assert.ok(own.structuredContent.facts.some((f) => f.content === "Tom Okafor is an AV engineer"));

    const context = await client.callTool({ name: "get_memory_context", arguments: {} });
    assert.match(text(context), /Tom Okafor prefers Slack/);
    assert.doesNotMatch(text(context), /maya\.chen@lumenlabs\.example|Fridays/);
  } finally {
    await client.close();
  }
});

test("the TypeScript SDK over stdio starts memoryctl mcp with the identity in its environment", async () => {
  const transport = new StdioClientTransport({
    command: env.MEMORY_TEST_MEMORYCTL, args: ["mcp"], stderr: "pipe",
    env: { PATH: env.PATH, MEMORY_STORE_URL: env.MEMORY_TEST_STORE_URL, MEMORY_EMBEDDING_PROVIDER: "hashing",
           MEMORY_MCP_AGENT: agent, MEMORY_MCP_USER: "user-maya", MEMORY_MCP_SESSION: "s3-maya-followup" },
  });
  const client = await connected(transport);
  try {
    const found = await client.callTool({ name: "search_memory", arguments: { query: "Where does Maya live now?" } });
    assert.ok(found.structuredContent.facts.some((f) => f.content.includes("Porto")), text(found));
    const refused = await client.callTool({ name: "get_memory_context", arguments: { session_id: "s4-tom-av" } });
    assert.equal(refused.isError, true);
  } finally {
    await client.close();
  }
});

test("the TypeScript SDK shows why the server refused the connection, as a JSON-RPC error", async () => {
  // this SDK puts the refused POST's body into its error: a JSON-RPC error object with the reason
  const wrongKey = `mk_0000000000000000_${"x".repeat(43)}`;
  for (const [headers, code, reason] of [
    [{ Authorization: `Bearer ${wrongKey}` }, 401, /unknown key/],
    [{ Authorization: `Bearer ${agentKey}` }, 400, /X-Memory-User/],
    [{ Authorization: `Bearer ${tomToken}`, "X-Memory-Session": "s3-maya-followup" }, 403, /not one of this user's/],
  ]) {
    const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers } });
    await assert.rejects(connected(transport), (error) => {
      assert.equal(error.code, code);
      const body = JSON.parse(error.message.slice(error.message.indexOf("{")));
      assert.equal(body.jsonrpc, "2.0");
      assert.match(body.error.message, reason);
      return true;
    });
  }
});

// Shared by the framework scripts: the client tool the scripted upstream
// calls, and the error shape each script prints.

// errorShape reads an HTTP error's status and message from any of the
// frameworks' error types (AI SDK APICallError, openai's APIError, and
// errors that wrap them as `cause`).
export function errorShape(e) {
  for (let x = e; x != null; x = x.cause) {
    const status = x.statusCode ?? x.status;
    if (typeof status === 'number') {
      const body = x.responseBody ?? (x.error ? JSON.stringify(x.error) : '');
      return { status, message: `${x.message ?? ''} ${body ?? ''}`.trim(), name: e.name };
    }
  }
  return { status: 0, message: String(e?.stack ?? e), name: e?.name };
}

export const weather = { city: 'Paris', forecast: 'sunny, 21C' };

export function print(out) {
  process.stdout.write(JSON.stringify(out) + '\n');
}

// tap is a fetch for a framework's client that records each request to
// the server: its path, status, whether it named previous_response_id, the
// types of its input items (role too for messages), and what its answer
// (JSON or SSE) reports: the response's status, its output item types,
// and the agent's calls as NAME:OUTCOME (the mcp_call items' tulip.outcome,
// in a response's output or a chat completion's tulip.calls). A refused
// request keeps its request and answer bodies (cut to 4 KB), for a report.
export function tap() {
  const requests = [], pending = [];
  const f = async (url, init) => {
    const res = await fetch(url, init);
    let body = {};
    try { body = JSON.parse(typeof init?.body === 'string' ? init.body : ''); } catch { /* not JSON */ }
    const r = { path: new URL(String(url.url ?? url)).pathname.replace(/^.*\/v1/, ''), status: res.status,
      prev: Boolean(body.previous_response_id), input: inputTypes(body) };
    requests.push(r);
    pending.push(res.clone().text().then(text => {
      readAnswer(r, text);
      if (res.status >= 400) { r.requestBody = String(init?.body ?? '').slice(0, 4096); r.responseBody = text.slice(0, 4096); }
    }, () => {}));
    return res;
  };
  return { fetch: f, requests, settled: () => Promise.all(pending) };
}

function inputTypes(body) {
  const items = Array.isArray(body.input) ? body.input : Array.isArray(body.messages) ? body.messages : [];
  return items.map(i => {
    const t = i.type ?? 'message';
    if (t !== 'message') return t;
    const parts = Array.isArray(i.content) ? i.content.map(p => p.type).filter(x => !['input_text', 'output_text', 'text'].includes(x)) : [];
    return [`message:${i.role}`, ...parts].join(':');
  });
}

function readAnswer(r, text) {
  let objs = [];
  if (text.trimStart().startsWith('{')) {
    try { objs = [JSON.parse(text)]; } catch { /* cut */ }
  } else {
    for (const line of text.split('\n')) {
      if (!line.startsWith('data:') || line.includes('[DONE]')) continue;
      try { objs.push(JSON.parse(line.slice(5))); } catch { /* not JSON */ }
    }
  }
  const outcomes = [];
  for (const o of objs) {
    const resp = o.object === 'response' ? o : (o.type === 'response.completed' || o.type === 'response.failed' || o.type === 'response.incomplete') ? o.response : null;
    if (resp) {
      r.responseStatus = resp.status;
      r.output = (resp.output ?? []).map(i => i.type);
      outcomes.length = 0;
      for (const i of resp.output ?? []) if (i.type === 'mcp_call') outcomes.push(`${i.name}:${i.tulip?.outcome}`);
    }
    for (const c of o.tulip?.calls ?? []) outcomes.push(`${c.name}:${c.tulip?.outcome}`);
  }
  r.outcomes = outcomes;
}

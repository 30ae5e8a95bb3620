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

// Requests to the instance. Every URL is relative, so the console works
// wherever the instance's mux is mounted, and carries no credentials of
// its own: a token, if the instance asks for one, rides in a cookie set
// by its login page, and a 401 sends the browser there.

export class HTTPError extends Error {
  constructor(status, body, message) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

let loginSent = false;

function toLogin() {
  if (loginSent) return;
  loginSent = true;
  const next = location.pathname + location.search + location.hash;
  location.assign('login?next=' + encodeURIComponent(next));
}

// getJSON fetches path and returns its JSON. A 401 leaves for the login
// page; any other status outside 2xx throws an HTTPError carrying the
// answer's "error" (the instance's JSON errors) or its status text.
export async function getJSON(path, { signal } = {}) {
  let resp;
  try {
    resp = await fetch(path, { headers: { Accept: 'application/json' }, credentials: 'same-origin', signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    setConn(false);
    throw new HTTPError(0, null, 'the instance does not answer');
  }
  setConn(true);
  if (resp.status === 401) {
    toLogin();
    throw new HTTPError(401, null, 'not logged in');
  }
  const text = await resp.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = null; }
  if (!resp.ok) {
    const msg = body && typeof body.error === 'string' ? body.error : `${resp.status} ${resp.statusText}`;
    throw new HTTPError(resp.status, body, msg);
  }
  return body;
}

function setConn(ok) {
  const el = document.getElementById('conn');
  if (!el) return;
  el.textContent = ok ? '' : 'disconnected';
  el.classList.toggle('bad', !ok);
}

// poll calls fn now and every ms after the previous call settled, until the
// returned stop is called. Errors are fn's to show.
export function poll(fn, ms) {
  let timer = null;
  let stopped = false;
  const ctl = new AbortController();
  const tick = async () => {
    try { await fn(ctl.signal); } catch (e) { if (e.name !== 'AbortError') console.warn(e); }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); ctl.abort(); };
}

// Local mode's small web app at /: logs in through the gateway, shows the user, calls both operations with the cookie
// on the provider account chosen (X-Upstream-Account), and shows which account answered.
import express, { type Router } from 'express';
import { routeName } from '../observability/request-log';

/** Scripts and styles from this origin only; calls to this origin only; no framing. */
const PAGE_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Payments BFF – browser session</title>
<link rel="stylesheet" href="/app.css"><script src="/app.js" defer></script></head>
<body><main>
<h1>Payments BFF gateway</h1>
<p class="lead">A web app that holds no token: the gateway logged you in and keeps the session; this page has only an HttpOnly cookie.</p>
<section id="signed-out" hidden><a id="login" class="button" href="/bff/login?returnTo=%2F">Log in</a></section>
<section id="signed-in" hidden>
  <p>Signed in as <strong id="user-name"></strong> &lt;<span id="user-email"></span>&gt; with scopes <code id="user-scopes"></code>
  <button id="logout" type="button">Log out</button></p>
  <label>Provider account <select id="account"><option value="">the app's default</option>
    <option value="sandbox">sandbox</option><option value="production">production</option></select></label>
  <form id="validate"><h2>Validate a document</h2>
    <label>Country <input name="country" value="ARG" size="4"></label>
    <label>Type <input name="type" value="CUIT" size="6"></label>
    <label>Id <input name="id" value="20-17254359-7"></label>
    <button type="submit">Validate</button></form>
  <form id="plan"><h2>Read a plan</h2>
    <label>Plan id <input name="planId" value="b8546575-5d4f-4a56-9e21-522d01cf5992" size="38"></label>
    <button type="submit">Read</button></form>
  <h2>Answer <small>from account <code id="answered-by">–</code></small></h2><pre id="answer">–</pre>
</section>
</main></body></html>`;

const SCRIPT = `'use strict';
const csrf = { 'X-CSRF': '1' };
const $ = (id) => document.getElementById(id);
const show = (status, body) => { $('answer').textContent = status + '\\n' + JSON.stringify(body, null, 2); $('answer').dataset.status = String(status); };
async function call(path, init) {
  const account = $('account') && $('account').value;
  const chosen = account ? { 'X-Upstream-Account': account } : {};
  const response = await fetch(path, { ...init, headers: { ...csrf, ...chosen, ...(init && init.headers) } });
  const body = await response.json().catch(() => null);
  if ($('answered-by')) $('answered-by').textContent = response.headers.get('X-Upstream-Account') || '–';
  if (response.status === 401) location.href = '/bff/login?returnTo=%2F';
  return { status: response.status, body };
}
async function start() {
  const response = await fetch('/bff/user', { headers: csrf });
  if (response.status !== 200) { $('signed-out').hidden = false; return; }
  const user = await response.json();
  $('user-name').textContent = user.name;
  $('user-email').textContent = user.email;
  $('user-scopes').textContent = user.scopes.join(' ');
  $('signed-in').hidden = false;
  document.body.dataset.ready = 'true';
}
$('validate').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const body = { country: form.get('country'), document: { id: form.get('id'), type: form.get('type') } };
  const { status, body: answer } = await call('/api/validation/document', { method: 'POST', body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });
  show(status, answer);
});
$('plan').addEventListener('submit', async (event) => {
  event.preventDefault();
  const id = new FormData(event.target).get('planId');
  const { status, body } = await call('/api/subscriptions/plan/' + encodeURIComponent(id));
  show(status, body);
});
$('logout').addEventListener('click', async () => {
  const { body } = await call('/bff/logout', { method: 'POST' });
  // The link carries id_token_hint (SESSION_END_SESSION_METHOD=get, the default); with post, a web app submits
  // body.endSessionForm as a top-level form POST instead (only where the provider takes POST there).
  location.href = (body && body.endSessionUrl) || '/';
});
start();
`;

const STYLE = `body{font:15px/1.5 system-ui,sans-serif;margin:0;background:#f5f6f8;color:#1d2330}
main{max-width:760px;margin:32px auto;padding:24px 32px;background:#fff;border-radius:8px;box-shadow:0 1px 4px #0002}
h1{margin-top:0}.lead{color:#555}form{margin:16px 0;padding:12px 16px;border:1px solid #dde;border-radius:6px}
h2{font-size:16px;margin:0 0 8px}label{margin-right:12px}input{font:inherit;padding:2px 6px}
button,.button{font:inherit;padding:4px 14px;border:0;border-radius:4px;background:#2b59c3;color:#fff;cursor:pointer;text-decoration:none}
pre{background:#1d2330;color:#e6e6e6;padding:12px;border-radius:6px;overflow:auto}code{background:#eef;padding:1px 4px}`;

export function localWebApp(): Router {
  const router = express.Router();
  const send = (type: string, body: string) => (_req: express.Request, res: express.Response) => {
    res.setHeader('Content-Security-Policy', PAGE_POLICY);
    res.type(type).send(body);
  };
  router.get('/', routeName('local-web-app', { quiet: true }), send('html', PAGE));
  router.get('/app.js', routeName('local-web-app', { quiet: true }), send('application/javascript', SCRIPT));
  router.get('/app.css', routeName('local-web-app', { quiet: true }), send('css', STYLE));
  return router;
}

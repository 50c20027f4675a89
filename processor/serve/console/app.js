// The console's router: one view at a time, chosen by the URL's hash
// (#/overview, #/topology, #/stores?store=…&key=…, #/deadletters), so every
// view has an address to bookmark and the back button works.
import { appInfo } from './nav.js';
import { clear, errorBox } from './dom.js';
import * as overview from './overview.js';
import * as topology from './topology.js';
import * as stores from './stores.js';
import * as deadletters from './deadletters.js';

const views = { overview, topology, stores, deadletters };

let unmount = null;

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [name, query] = raw.split('?');
  return { name: views[name] ? name : 'overview', params: new URLSearchParams(query || '') };
}

function route(ev) {
  const { name, params } = parseHash();
  if (unmount) { unmount(); unmount = null; }
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.view === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const main = clear(document.getElementById('main'));
  main.dataset.view = name;
  document.title = `${views[name].title} · sluice`;
  try {
    unmount = views[name].mount(main, params) || null;
  } catch (e) {
    main.append(errorBox(String(e)));
  }
  // A new view is announced where it starts, as a new page would be.
  if (ev) main.focus({ preventScroll: true });
}

window.addEventListener('hashchange', route);
appInfo().then((info) => {
  document.getElementById('app-id').textContent = info.application_id;
}).catch(() => {});
route();

// What every view shares: the application's description and moving
// between views.
import { getJSON } from './api.js';

// appInfo is GET /app, read once: the application id and its topics' names.
let infoPromise = null;
export function appInfo() {
  if (!infoPromise) {
    infoPromise = getJSON('app').catch((e) => { infoPromise = null; throw e; });
  }
  return infoPromise;
}

// go changes the view (and its parameters) from within a view.
export function go(name, params = {}) {
  const q = new URLSearchParams(params).toString();
  location.hash = '#/' + name + (q ? '?' + q : '');
}

/* PowerOn's service worker (issue 23): shows the Web Push notifications the server sends and opens
 * the page a notification points at when it is clicked. Served at the root (/sw.js) so that its
 * scope is the whole app. A push carries JSON: {title, body, url, icon, event} (backend/notifications/push.py);
 * every push is a notification of its own (no tag: two new tasks are two notifications). */

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  let message = {};
  try {
    message = event.data ? event.data.json() : {};
  } catch (error) {
    message = { body: event.data ? event.data.text() : "" };
  }
  const title = message.title || "PowerOn";
  event.waitUntil(
    self.registration.showNotification(title, {
      body: message.body || "",
      icon: message.icon || "/icons/icon-192.png",
      badge: "/icons/icon-maskable-192.png",
      data: { url: message.url || "/", event: message.event || "" },
    }),
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const target = new URL((event.notification.data && event.notification.data.url) || "/", self.location.origin);
  event.waitUntil(
    self.clients.matchAll({ type: "window", includeUncontrolled: true }).then((windows) => {
      for (const client of windows) {
        if (new URL(client.url).origin === target.origin && "focus" in client) {
          return client.focus().then((focused) => (focused && "navigate" in focused ? focused.navigate(target.href) : focused));
        }
      }
      return self.clients.openWindow(target.href);
    }),
  );
});

# Workspace Operations: one image for the API processes (the default command) and the worker
# (`node dist/scripts/worker.js`). See "Run in production" in README.md and compose.yaml.
#
#   docker build -t workspace-operations .
#   docker run --rm -p 8080:8080 -v wsops-data:/data workspace-operations     # SQLite in the volume
#
# The build stage installs the dependencies (better-sqlite3 is compiled from source when no prebuilt
# binary can be had), compiles the service to JavaScript in dist/ (`npm run build`: tsc, the files the
# code reads, the browser bundles) and drops the development dependencies; the runtime stage holds
# dist/, the production node_modules and package.json, and runs plain node: no tsx, no esbuild, no
# TypeScript sources.

ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
# The SQLite driver's fallback: a build from source with node-gyp.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
# The whole context (small, see .dockerignore) before `npm ci`: the lockfile may name workspaces.
COPY . .
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund
RUN npm run build
# Keep the production dependencies only: tsx, esbuild, TypeScript, Dredd, Redocly... are development
# ones (the browser bundles were made by the build). The client package's workspace link goes too
# (the service does not import it). Then load the whole compiled service once with plain node, so a
# runtime dependency pruned by mistake fails the build, not the start.
# The evidence pages' Noto fonts come in every weight; only 400Regular is drawn (handlers/signing/archive/pdfText.ts):
# the others (about 140 MB) are dropped.
RUN npm prune --omit=dev --no-audit --no-fund \
 && rm -rf node_modules/@workspace-operations \
 && test ! -e node_modules/tsx && test ! -e node_modules/esbuild \
 && find node_modules/@expo-google-fonts -mindepth 2 -maxdepth 2 -type d ! -name 400Regular -exec rm -rf {} + \
 && node --input-type=module -e "await import('./dist/app.js')"

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    PORT=8080 \
    DATABASE_URL=sqlite:/data/service.sqlite
WORKDIR /app
# A non-root user; the code is owned by root and read-only to it. /data holds the SQLite database.
RUN groupadd --system --gid 10001 wsops \
 && useradd --system --uid 10001 --gid wsops --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin wsops \
 && mkdir -p /data \
 && chown wsops:wsops /data
COPY --from=build /app/package.json /app/package.json
COPY --from=build /app/node_modules /app/node_modules
COPY --from=build /app/dist /app/dist
USER wsops
VOLUME ["/data"]
EXPOSE 8080
# The worker has no HTTP listener: compose.yaml turns this check off for it.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Exec form: node is PID 1 and gets SIGTERM itself (scripts/start.ts, compiled, then finishes the
# requests in flight, writes queued analytics events, stops jobs and exits 0).
CMD ["node", "dist/scripts/start.js"]

# syntax=docker/dockerfile:1
# Payments BFF gateway: a build stage that compiles the TypeScript, and a small non-root runtime stage that holds
# only production dependencies, the compiled code and the production client registry. Secrets come at run time as
# files. Left out on purpose: config/clients.local.json (the development key), the compose and nginx files.

# One base image for both stages, pinned to a digest so that every build starts from the same bytes: the index
# digest of node:24-bookworm-slim as published for Node 24.18.0 (the same digest appears in public Dockerfiles; no
# registry is reachable where this file is written, so it was not pulled here). To move to a newer Node 24 release,
# read the digest where you build and pass it, or update this line:
#   docker buildx imagetools inspect node:24-bookworm-slim      # prints the index digest of today's tag
#   docker build --build-arg NODE_IMAGE=node:24-bookworm-slim@sha256:<digest> .
ARG NODE_IMAGE=node:24-bookworm-slim@sha256:6f7b03f7c2c8e2e784dcf9295400527b9b1270fd37b7e9a7285cf83b6951452d

# --- build ------------------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
# Install scripts are skipped: the compiler needs none of them (the pinned `node` devDependency would otherwise
# download a second Node binary into the build stage).
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npx tsc -p tsconfig.json

# --- runtime ----------------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    PORT=8080
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist/src ./dist/src
# The production registry (ships empty) and its schema only: never clients.local.json.
COPY config/clients.json config/clients.schema.json config/operations.json config/operations.schema.json ./config/
# uid/gid 10001: the Kubernetes manifests (deploy/k8s) run the pod as this user with runAsNonRoot.
RUN groupadd --system --gid 10001 gateway \
 && useradd --system --uid 10001 --gid gateway --no-create-home --shell /usr/sbin/nologin gateway
USER 10001:10001
EXPOSE 8080
# No curl in the slim image: Node's own fetch probes liveness (the process serves; no dependency checked).
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM reaches node directly (exec form, node is PID 1): the gateway handles it from its first line on, also
# during start-up (readiness 503, drain, close Redis, exit 0).
# The flags are package.json's config.nodeFlags (a test holds the two equal): a young generation of a fixed 64 MiB
# per semi-space. Each call waiting on the provider keeps objects alive through scavenges; a fixed, larger young
# generation costs resident memory and saves CPU per request (docs/operations.md, "Runtime flags").
CMD ["node", "--min-semi-space-size=64", "--max-semi-space-size=64", "dist/src/main.js"]

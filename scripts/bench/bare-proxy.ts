/**
 * The benchmark's baseline: a bare @fastify/http-proxy over HTTPS with the
 * same certificate in front of the same upstream, doing nothing else.
 */
import { readFileSync } from 'node:fs'
import Fastify from 'fastify'
import proxy from '@fastify/http-proxy'

const [port, upstreamPort, certFile, keyFile] = process.argv.slice(2)
const app = Fastify({ logger: false, https: { cert: readFileSync(certFile!), key: readFileSync(keyFile!) } })
await app.register(proxy, { upstream: `http://127.0.0.1:${upstreamPort}`, prefix: '/v1/agents', rewritePrefix: '/v1/agents' })
await app.listen({ port: Number(port), host: '127.0.0.1' })
process.stdout.write('bare proxy ready\n')
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)))

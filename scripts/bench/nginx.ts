/**
 * The nginx reference row: Debian's nginx, one process (daemon off,
 * master_process off, worker_processes 1, so the process started is the
 * worker), TLS with the benchmark's certificate, proxy_pass to the same
 * upstream over a keep-alive pool. Its configuration, pid, logs and temp
 * paths live in a directory of the run. No access log (as the bare proxy
 * logs nothing).
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import type { Certificate } from './fixtures.js'
import type { Started } from './processes.js'
import { findExecutable, start } from './processes.js'

/** The nginx binary on PATH (or in /usr/sbin), or null when it is not installed. */
export function findNginx(): string | null {
  return findExecutable('nginx', ['/usr/sbin', '/usr/local/sbin'])
}

export function nginxConfig(dir: string, port: number, upstreamPort: number, tls: Certificate): string {
  return `daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream bench_upstream {
    server 127.0.0.1:${upstreamPort};
    keepalive 64;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
  }
  server {
    listen 127.0.0.1:${port} ssl;
    ssl_certificate ${tls.certFile};
    ssl_certificate_key ${tls.keyFile};
    ssl_protocols TLSv1.2 TLSv1.3;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    location / {
      proxy_pass http://bench_upstream;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

export function startNginx(binary: string, dir: string, port: number, upstreamPort: number, tls: Certificate): Promise<Started> {
  mkdirSync(dir, { recursive: true })
  const file = join(dir, 'nginx.conf')
  writeFileSync(file, nginxConfig(dir, port, upstreamPort, tls))
  return start('nginx', binary, ['-p', dir, '-c', file, '-e', join(dir, 'error.log')], {}, () => accepts(port))
}

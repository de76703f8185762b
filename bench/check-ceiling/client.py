"""The acceptance perf check's client, alone: http.client, a new connection per request, 4 threads,
json.loads of every answer, the multipart body built per request as the check's harness builds it.
Prints requests per second, and the client's own page faults per request (glibc gives its threads'
freed heap back with madvise and faults it in again; how much of it depends on the server's timing).
  python3 client.py IMAGE PORT [KEY]"""
import concurrent.futures as cf, http.client, json, resource, sys, time, uuid

data = open(sys.argv[1], 'rb').read()
port = int(sys.argv[2])
key = sys.argv[3] if len(sys.argv) > 3 else 'x'


def upload():
    b = '----accept' + uuid.uuid4().hex
    body = b''
    body += ('--%s\r\nContent-Disposition: form-data; name="image"; filename="a.jpg"\r\n' % b).encode()
    body += b'Content-Type: image/jpeg\r\n'
    body += b'\r\n' + data + b'\r\n'
    body += ('--%s--\r\n' % b).encode()
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
    c.request('POST', '/api/v1/protect', body, {'Content-Type': 'multipart/form-data; boundary=' + b, 'Authorization': 'Bearer ' + key})
    r = c.getresponse()
    raw = r.read()
    c.close()
    json.loads(raw)
    return r.status


for _ in range(3):
    upload()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
t = time.time()
with cf.ThreadPoolExecutor(4) as ex:
    statuses = list(ex.map(lambda i: upload(), range(120)))
wall = time.time() - t
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
print('%.1f req/s, client page faults %.0f per request, statuses %s' % (120 / wall, faults / 120, sorted(set(statuses))))

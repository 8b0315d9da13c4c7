#!/usr/bin/env python3
# callgrind-diff.py A B N [MIN]: per function, the instructions per request B spends beyond A
# (two callgrind outputs of N requests each, e.g. from benches/kv-callgrind.sh), exclusive then
# inclusive, largest first, rows under MIN (3) Ir/request left out.
import re,subprocess,sys
a,b,n=sys.argv[1],sys.argv[2],int(sys.argv[3])
def load(f,incl):
    out=subprocess.run(['callgrind_annotate','--threshold=100','--inclusive='+('yes' if incl else 'no'),f],capture_output=True,text=True).stdout
    d={}
    for l in out.splitlines():
        m=re.match(r'^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$',l)
        if not m: continue
        k=m.group(2)
        if '=>' in k or k.startswith('*'): continue
        k=re.sub(r'\[[^\]]*\]$','',k).strip()
        k=re.sub(r'^/work/wt/\w+/|^/rustc/\w+/','',k)
        d[k]=d.get(k,0)+int(m.group(1).replace(',',''))
    return d
for incl in [False,True]:
    A=load(a,incl);B=load(b,incl)
    print("== inclusive" if incl else "== exclusive")
    rows=sorted(((B.get(k,0)-A.get(k,0))/n,k,A.get(k,0)/n,B.get(k,0)/n) for k in set(A)|set(B))
    tot=0
    for d,k,x,y in sorted(rows,key=lambda r:-abs(r[0])):
        if abs(d)>=float(sys.argv[4] if len(sys.argv)>4 else 3): print(f"{d:8.1f} {x:8.1f} {y:8.1f} {k[:140]}")

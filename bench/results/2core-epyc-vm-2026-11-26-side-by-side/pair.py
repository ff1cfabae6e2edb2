import re,sys,statistics,collections
# per-round ratios A/B from Google Benchmark console lines of an --async_rounds run
a_name,b_name=sys.argv[2],sys.argv[3]
vals=collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    line=re.sub(r'\x1b\[[0-9;]*m','',line)
    m=re.match(r'(\S+?)/(\d+p\d+c|\d+p\d+c/\S+?)/(.+?)/manual_time\s.*?([\d.]+)([MkG])/s',line)
    if not m: continue
    case=m.group(1)+'/'+m.group(2); impl=m.group(3)
    v=float(m.group(4))*{'k':1e-3,'M':1,'G':1e3}[m.group(5)]
    vals[case][impl].append(v)
for case in vals:
    a=vals[case].get(a_name); b=vals[case].get(b_name)
    if not a or not b: continue
    r=[x/y for x,y in zip(a,b)]
    print(f"| {case} | {statistics.median(a):.2f} | {statistics.median(b):.2f} | {statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f}) | {len(r)} |")

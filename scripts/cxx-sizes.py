#!/usr/bin/env python3
# Sizes of C++ files and of the functions in them, for the house limits (no
# file over 600 lines, no function over 150):
#   python3 scripts/cxx-sizes.py src/binding/*.cc src/binding/*.h src/core/*
# A function is a '{' whose preceding statement text looks like a signature
# "name(...)" (not if/for/while/switch/catch, not a lambda), counted from the
# line of its '{' to the line of its matching '}'; braces in strings, chars
# and comments are ignored. Nested functions (lambdas, local classes) count
# within their outer function. A heuristic parser, not a compiler.
import re, sys
def strip(src):
    out=[];i=0;n=len(src)
    while i<n:
        c=src[i]
        if src.startswith('//',i):
            j=src.find('\n',i); j=n if j<0 else j; out.append(' '*(j-i)); i=j
        elif src.startswith('/*',i):
            j=src.find('*/',i)+2; out.append(re.sub(r'[^\n]',' ',src[i:j])); i=j
        elif c in '"\'':
            j=i+1
            while j<n and src[j]!=c:
                j+= 2 if src[j]=='\\' else 1
            out.append(c+' '*(j-i-1)+c); i=j+1
        else: out.append(c); i+=1
    return ''.join(out)
kw={'if','for','while','switch','catch','return','sizeof','defined'}
for path in sys.argv[1:]:
    s=strip(open(path).read())
    stack=[]; res=[]
    for m in re.finditer(r'[{}]',s):
        if m.group()=='{':
            start=m.start()
            k=max(s.rfind(';',0,start),s.rfind('{',0,start),s.rfind('}',0,start))
            head=s[k+1:start]
            mm=re.search(r'([~\w:]+)\s*\(',head)
            isfn = mm is not None and mm.group(1).split('::')[-1] not in kw and not re.search(r'\]\s*\(',head) and ')' in head and '=' not in head.split('(')[0]
            stack.append((start,mm.group(1) if isfn else None))
        else:
            if not stack: continue
            start,name=stack.pop()
            if name and not any(n for _,n in stack):
                a=s.count('\n',0,start)+1; b=s.count('\n',0,m.start())+1
                res.append((b-a+1,a,name))
    lines=s.count('\n')
    big=[r for r in res if r[0]>150]
    top=sorted(res,reverse=True)[:3]
    print(f"{path}: {lines} lines; longest: " + ", ".join(f"{n} {l} lines (line {a})" for l,a,n in top) + (f"  OVER 150: {big}" if big else ""))

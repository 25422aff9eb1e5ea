#!/usr/bin/env python3
# Sizes of C++ files, of the functions in them and of their classes, for the
# house limits (no file over 600 lines, no function over 150, no class over
# 500):
#   python3 scripts/cxx-sizes.py src/binding/*.cc src/binding/*.h src/core/*
# Exits 1 when anything is over its limit (scripts/lint.sh runs it).
#
# A function is a '{' whose preceding statement text looks like a signature
# "name(...)" (not if/for/while/switch/catch, not a lambda), counted from the
# line of its '{' to the line of its matching '}'; braces in strings, chars
# and comments are ignored. Nested functions (lambdas, local classes) count
# within their outer function. A class's size is the sum of its member
# functions' bodies over every file given: those defined out of line
# ("Class::Method", or "Outer::Inner::Method" for a nested class) and those
# defined inline in its definition. A heuristic parser, not a compiler.
import re, sys
from collections import defaultdict

MAX_FILE, MAX_FUNCTION, MAX_CLASS = 600, 150, 500

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

def drop_template_heads(head):
    # "template <..., void (T::*m)(...)>" holds parentheses of its own: the
    # signature is what follows the matching '>'.
    while True:
        m=re.search(r'\btemplate\s*<',head)
        if not m: return head
        depth=0; i=m.end()-1
        while i<len(head):
            depth+= {'<':1,'>':-1}.get(head[i],0)
            if depth==0: break
            i+=1
        head=head[:m.start()]+head[i+1:]
class_lines=defaultdict(int)
class_files=defaultdict(set)
over=[]
for path in sys.argv[1:]:
    s=strip(open(path).read())
    # Each stack entry: (start, kind, name); kind is 'fn', 'class' or None.
    stack=[]; res=[]
    for m in re.finditer(r'[{}]',s):
        if m.group()=='{':
            start=m.start()
            k=max(s.rfind(';',0,start),s.rfind('{',0,start),s.rfind('}',0,start))
            head=drop_template_heads(s[k+1:start])
            mm=re.search(r'([~\w:]+)\s*\(',head)
            isfn = mm is not None and mm.group(1).split('::')[-1] not in kw and not re.search(r'\]\s*\(',head) and ')' in head and '=' not in head.split('(')[0]
            cm=re.search(r'\b(?:class|struct)\s+(\w+)[^(){};]*$',head)
            if isfn:
                stack.append((start,'fn',mm.group(1)))
            elif cm and not any(kind=='fn' for _,kind,_ in stack):
                stack.append((start,'class',cm.group(1)))
            else:
                stack.append((start,None,None))
        else:
            if not stack: continue
            start,kind,name=stack.pop()
            if kind=='fn' and not any(kd=='fn' for _,kd,_ in stack):
                a=s.count('\n',0,start)+1; b=s.count('\n',0,m.start())+1
                res.append((b-a+1,a,name))
                outer='::'.join(n for _,kd,n in stack if kd=='class')
                qual=name.rsplit('::',1)[0] if '::' in name else ''
                owner='::'.join(x for x in (outer,qual) if x)
                if owner:
                    class_lines[owner]+=b-a+1
                    class_files[owner].add(path.rsplit('/',1)[-1])
    lines=s.count('\n')
    big=[r for r in res if r[0]>MAX_FUNCTION]
    top=sorted(res,reverse=True)[:3]
    print(f"{path}: {lines} lines; longest: " + ", ".join(f"{n} {l} lines (line {a})" for l,a,n in top) + (f"  OVER {MAX_FUNCTION}: {big}" if big else ""))
    if lines>MAX_FILE: over.append(f"file {path}: {lines} lines (limit {MAX_FILE})")
    over += [f"function {n} in {path}: {l} lines (limit {MAX_FUNCTION})" for l,a,n in big]
print("classes (member function lines over the files given):")
for name,n in sorted(class_lines.items(), key=lambda kv:-kv[1]):
    print(f"  {name}: {n} lines in {', '.join(sorted(class_files[name]))}")
    if n>MAX_CLASS: over.append(f"class {name}: {n} lines (limit {MAX_CLASS})")
if over:
    print("OVER THE LIMITS:\n  " + "\n  ".join(over), file=sys.stderr)
    sys.exit(1)

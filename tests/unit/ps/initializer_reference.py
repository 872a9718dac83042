#!/usr/bin/env python3
# Independent implementation of the initializer recipe documented in
# ps/initializer.h; prints the golden values pinned in initializer_test.cc.
import math, struct
M=(1<<64)-1
def rotl(x,r): return ((x<<r)|(x>>(64-r)))&M
def mix64(salt,key):
    z=key ^ rotl(salt,32)
    z=(z+0x9E3779B97F4A7C15)&M
    z=((z^(z>>30))*0xBF58476D1CE4E5B9)&M
    z=((z^(z>>27))*0x94D049BB133111EB)&M
    return z^(z>>31)
G=0x9E3779B97F4A7C15
def draw(state,j):
    z=(state+(j+1)*G)&M
    z=((z^(z>>30))*0xBF58476D1CE4E5B9)&M
    z=((z^(z>>27))*0x94D049BB133111EB)&M
    return z^(z>>31)
f32=lambda x: struct.unpack('f',struct.pack('f',x))[0]
def uniform(seed,key,n,lo,hi):
    lo=f32(lo);hi=f32(hi)
    st=mix64(seed,key);out=[]
    for i in range(0,n,2):
        x=draw(st,i//2)
        out.append(f32(lo+(hi-lo)*((x>>40)*2**-24)))
        if i+1<n: out.append(f32(lo+(hi-lo)*(((x>>16)&0xFFFFFF)*2**-24)))
    return out
def tnorm(seed,key,n,mean,sd):
    st=mix64(seed,key);out=[];j=0
    while len(out)<n:
        u1=((draw(st,j)>>11)+1)*2**-53; u2=(draw(st,j+1)>>11)*2**-53; j+=2
        r=math.sqrt(-2*math.log(u1))
        for v in (r*math.cos(2*math.pi*u2), r*math.sin(2*math.pi*u2)):
            if abs(v)>2 or len(out)>=n: continue
            out.append(f32(mean+sd*v))
    return out
u=uniform(42,7,4,-0.05,0.05); n=tnorm(42,7,4,0,1)
for i,v in enumerate(u): print(f"U{i} = {v!r}f")
for i,v in enumerate(n): print(f"N{i} = {v!r}f")

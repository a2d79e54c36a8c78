#!/usr/bin/env python3
"""Algorithm model of rope_window's wgmma cut (rope.cuh WindowCut, fwd_wgmma.cuh) and of the
zeroed-Q experiment (window_zeroed_q.patch), checked against the exact rule on sampled cells.

For every warpgroup tile it rebuilds what the kernel multiplies (k steps from the lead on, the
lead step's dead pairs masked, or zeroed pairs contributing nothing) and what it takes back per
cell (pairs multiplied but out of the window of some cell of a warp's rows), and compares the
score of each sampled cell with the sum over the pairs whose window holds it. Pair terms are
arbitrary numbers: only which pairs count is modelled. Prints one line per configuration with
its mismatch count (0 expected everywhere). No GPU needed.
"""
import random, math
def pairs_from(p, w):
    lo=32*w
    return 0xffffffff if p<=lo else ((~((1<<(p-lo))-1))&0xffffffff if p<lo+32 else 0)
def abs_range(qlo,qhi,klo,khi):
    dlo=qlo-khi; dhi=qhi-klo
    mn = dlo if dlo>0 else (-dhi if dhi<0 else 0)
    mx = -dlo if -dlo>dhi else dhi
    return mn,mx
def check(D, half, lim, N, causal, zeroq, qoff=0, Nq=None):
    Nq = Nq or N
    P=half; words=(D//2+31)//32; steps=D//16
    rng=random.Random(1)
    # per-pair term per (q,k): random but deterministic
    term=lambda r,i,j: ((r*7919+i*104729+j*1299709)%1000)/1000-0.5
    unrot=lambda i,j: 0.0 if 2*half>=D else 1.0
    errs=0
    for m0 in range(0,Nq,128):
        for wg in range(2):
            glo=m0+64*wg
            if glo>=Nq: continue
            ghi=min(glo+63,Nq-1)
            ntiles=[c for c in range((N+127)//128) if (not causal) or 128*c <= ghi+qoff]
            order = list(reversed(ntiles)) if zeroq else ntiles
            zeroed=set(); 
            for c in order:
                klo=128*c; khi=min(klo+127,N-1)
                gmin,gmax=abs_range(glo+qoff,ghi+qoff,klo,khi)
                if zeroq:
                    for r in range(P):
                        if r not in zeroed and lim[r]<gmin: zeroed.add(r)
                    live=[r for r in range(P) if r not in zeroed]
                    first=2*live[0] if live else (2*half if 2*half<D else D)
                    lead=min(first//16, steps-1)
                    inprod=set(r for r in range(P) if r not in zeroed and r>=8*lead)
                    # zeroed Q => zeroed pairs contribute 0 even in steps >= lead
                else:
                    kept=[r for r in range(P) if lim[r]>=gmin]
                    first=2*kept[0] if kept else (2*half if 2*half<D else D)
                    first=min(first, 2*half if 2*half<D else D)
                    lead=min(first//16, steps-1)
                    inprod=set(r for r in range(P) if r>=8*(lead+1) or (8*lead<=r<8*lead+8 and lim[r]>=gmin))
                for warp in range(4):
                    wlo=glo+16*warp
                    if wlo>ghi: wlo=ghi
                    whi=min(wlo+15,ghi)
                    wmin,wmax=abs_range(wlo+qoff,whi+qoff,klo,khi)
                    corr=set(r for r in inprod if lim[r]<wmax)
                    for i in range(wlo, whi+1, 5):
                        for j in range(klo, khi+1, 7):
                            d=i+qoff-j
                            if causal and d<0: continue
                            exact=sum(term(r,i,j) for r in range(P) if abs(d)<=lim[r]) + unrot(i,j)
                            # unrotated dims: in product only if their step >= lead (always: lead <= first unrotated step)
                            got=sum(term(r,i,j) for r in inprod) + unrot(i,j)
                            got-=sum(term(r,i,j) for r in corr if abs(d)>lim[r])
                            if abs(got-exact)>1e-9: errs+=1
    return errs
random.seed(0)
for D in (64,128):
    for base,k,rot in [(10000,0.25,D),(10000,1,D),(100,0.25,D),(100,0.25,32),(10000,1,20),(500000,1,D)]:
        half=rot//2
        lam=[2*math.pi*base**(2*r/rot) for r in range(half)]
        lim=[math.floor(k*l) for l in lam]
        zig=[lim[r]*(40 if r%2 else 1) for r in range(half)]
        for L,name in [(lim,'mono'),(zig,'zigzag')]:
            for causal in (True,False):
                for zq in ((False,True) if causal and name=='mono' or causal else (False,)):
                    e=check(D,half,L,700,causal,zq)
                    print(D,base,k,rot,name,'causal' if causal else 'full','zeroq' if zq else 'cur', 'errors',e)

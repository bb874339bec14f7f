// speed2: ALU (mode 0) or pointer-chase (mode 1, over KB) speed in windows, pinned: cpu seconds mode [KB]; prints a histogram
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <stdint.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
// mode 0: ALU chain; mode 1: pointer chase over argv[4] KB
int main(int c,char**v){cpu_set_t s;CPU_ZERO(&s);CPU_SET(atoi(v[1]),&s);sched_setaffinity(0,sizeof s,&s);
 double dur=atof(v[2])*1e9,t0=now(); int mode=atoi(v[3]); size_t kb=c>4?atoi(v[4]):256; size_t n=kb*1024/64;
 uint64_t *buf=aligned_alloc(64,n*64); size_t *perm=malloc(n*sizeof(size_t)); for(size_t i=0;i<n;i++)perm[i]=i;
 srand(1); for(size_t i=n-1;i>0;i--){size_t j=rand()%(i+1);size_t t=perm[i];perm[i]=perm[j];perm[j]=t;}
 for(size_t i=0;i<n;i++) buf[perm[i]*8]=perm[(i+1)%n]*8;
 int hist[400]={0}; uint64_t x=1,p=0; long w=0;
 while(now()-t0<dur){double a=now(); if(mode==0){for(int i=0;i<100000;i++)x=x*6364136223846793005ULL+1442695040888963407ULL;}
   else {for(int i=0;i<20000;i++)p=buf[p];}
   double b=now(); double per=(b-a)/(mode==0?100000.0:20000.0); int k=(int)(per*(mode==0?100:10)); if(k>399)k=399; hist[k]++; w++; }
 printf("cpu%s mode%d windows=%ld (x=%lu p=%lu)\n",v[1],mode,w,x&1,p&1);
 for(int k=0;k<400;k++) if(hist[k]*200>w) printf("  %.2f ns: %d\n", k/(mode==0?100.0:10.0), hist[k]);
}

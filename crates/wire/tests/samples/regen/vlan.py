# sends tagged frames (802.1Q id 100, and QinQ 802.1ad 200 / 802.1Q 300) carrying an ICMP echo request
import socket, struct
def csum(b):
    if len(b)%2: b+=b'\0'
    s=sum(struct.unpack('!%dH'%(len(b)//2),b)); s=(s&0xffff)+(s>>16); s=(s&0xffff)+(s>>16); return (~s)&0xffff
def icmp_ip(src,dst,ident,seq):
    data=bytes(range(16))
    ic=struct.pack('!BBHHH',8,0,0,ident,seq)+data
    ic=ic[:2]+struct.pack('!H',csum(ic))+ic[4:]
    ip=struct.pack('!BBHHHBBH4s4s',0x45,0,20+len(ic),0x1234,0x4000,64,1,0,socket.inet_aton(src),socket.inet_aton(dst))
    ip=ip[:10]+struct.pack('!H',csum(ip))+ip[12:]
    return ip+ic
s=socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(('wa0',0))
d=bytes.fromhex('020000000002'); m=bytes.fromhex('020000000001')
s.send(d+m+struct.pack('!HHH',0x8100,(3<<13)|100,0x0800)+icmp_ip('10.0.100.1','10.0.100.2',0x77,1))
s.send(d+m+struct.pack('!HHHHH',0x88a8,200,0x8100,300,0x0800)+icmp_ip('10.0.230.1','10.0.230.2',0x78,2))
